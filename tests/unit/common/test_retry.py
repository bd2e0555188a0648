"""Retries of calls that need a server: backoff, warnings, giving up only when stopping."""

from __future__ import annotations

import logging
import threading

import pytest

from streaming_app.common import retry
from streaming_app.common.retry import with_retries
from streaming_app.errors import PeerUnreachableError, StopRequestedError


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


def test_with_retries_gives_up_once_failing_for_longer_than_give_up_after(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [100.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: clock[0])
    waits: list[float] = []

    class Clock(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0)
            clock[0] += timeout or 0
            return False

    def call() -> None:
        clock[0] += 5  # each attempt hangs 5 s before it fails (a TCP timeout)
        raise OSError("connection timed out")

    with (
        caplog.at_level(logging.WARNING, logger="streaming_app.common.retry"),
        pytest.raises(PeerUnreachableError) as raised,
    ):
        with_retries(
            "writing to PostgreSQL at 10.0.0.2:5432",
            call,
            Clock(),
            give_up_after=20,
            setting="postgres_give_up_after",
        )
    # From the start of the first failed attempt: 5 + 1 + 5 + 2 + 5 = 18 s, then the
    # backoff is cut to the 2 s left, and the attempt after it ends at 25 s.
    assert waits == [1, 2, 2]
    assert str(raised.value) == (
        "writing to PostgreSQL at 10.0.0.2:5432: unreachable for 25 s (4 attempts, the last: "
        "OSError: connection timed out); gave up (postgres_give_up_after = 20 s); a restart "
        "resumes from the checkpoint"
    )
    assert raised.value.exit_code == 1
    assert caplog.text.count("failed (attempt") == 3


def test_a_single_failed_attempt_is_said_in_the_singular(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: clock[0])

    def call() -> None:
        clock[0] += 12  # one attempt that outlasts the limit (a connect timeout)
        raise OSError("connection timed out")

    with pytest.raises(PeerUnreachableError) as raised:
        with_retries("reading offsets", call, threading.Event(), give_up_after=10, setting="x")
    assert str(raised.value) == (
        "reading offsets: unreachable for 12 s (1 attempt: OSError: connection timed out); "
        "gave up (x = 10 s); a restart resumes from the checkpoint"
    )
