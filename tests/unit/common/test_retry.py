"""Retries of calls that need a server: backoff, warnings, giving up only when stopping."""

from __future__ import annotations

import logging
import threading

import pytest

from streaming_app.common.retry import with_retries
from streaming_app.errors import StopRequestedError


def test_with_retries_backs_off_warns_and_succeeds(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    waits: list[float] = []

    class NoWait(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0)
            return False

    attempts = iter([OSError("connection refused")] * 7 + [None])

    def call() -> str:
        error = next(attempts)
        if error:
            raise error
        return "ok"

    resets: list[int] = []
    with caplog.at_level(logging.WARNING, logger="streaming_app.common.retry"):
        assert with_retries("reading offsets", call, NoWait(), lambda: resets.append(1)) == "ok"
    assert waits == [1, 2, 4, 8, 16, 30, 30]
    assert len(resets) == 7
    assert (
        "reading offsets failed (attempt 1): OSError: connection refused; retrying in 1 s"
        in caplog.text
    )
    assert "succeeded after 7 failed attempts" in caplog.text


def test_with_retries_gives_up_only_when_stopping() -> None:
    stop = threading.Event()

    def call() -> None:
        stop.set()
        raise OSError("down")

    with pytest.raises(StopRequestedError, match="gave up on reading offsets"):
        with_retries("reading offsets", call, stop)
