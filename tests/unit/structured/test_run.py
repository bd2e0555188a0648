"""The structured engine's wait on its queries: a failed query the app did not expect is
logged with its trace (Spark's own report of it is off), one of the app's errors is not."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streaming_app.structured.run import await_any


class FailedQuery:
    """A query whose awaitTermination raises `error`."""

    isActive = False  # noqa: N815 (Spark's name)

    def __init__(self, error: Exception) -> None:
        self.error = error

    def awaitTermination(self, seconds: float) -> Any:  # noqa: N802 (Spark's name)
        raise self.error


class RunningQuery:
    isActive = True  # noqa: N815 (Spark's name)

    def awaitTermination(self, seconds: float) -> bool:  # noqa: N802 (Spark's name)
        return False


def test_an_unexpected_failure_is_logged_with_its_trace(caplog: pytest.LogCaptureFixture) -> None:
    error = RuntimeError("java.lang.OutOfMemoryError: Java heap space")
    with caplog.at_level(logging.ERROR), pytest.raises(RuntimeError):
        await_any([FailedQuery(error)], 0.1)
    (record,) = caplog.records
    assert "the streaming query failed: java.lang.OutOfMemoryError" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[1] is error


def test_the_apps_own_error_is_left_to_its_one_line(caplog: pytest.LogCaptureFixture) -> None:
    error = RuntimeError(
        "Traceback ...\nstreaming_app.errors.PeerUnreachableError: reading offsets of t "
        "from the Kafka broker at 10.0.0.1:9092: unreachable for 600 s (...)"
    )
    with caplog.at_level(logging.ERROR), pytest.raises(RuntimeError):
        await_any([RunningQuery(), FailedQuery(error)], 0.1)
    assert caplog.records == []


def test_a_running_query_is_waited_on() -> None:
    assert await_any([RunningQuery()], 0.1) is False
