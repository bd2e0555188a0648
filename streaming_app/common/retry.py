"""Retrying a call that needs a server (a broker, a database): backoff, warnings, stop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from streaming_app.common.prometheus import count_retry, retry_began, retry_ended
from streaming_app.errors import PeerUnreachableError, StopRequestedError, StreamingAppError

log = logging.getLogger(__name__)

T = TypeVar("T")


# Backoff between attempts to reach the broker: 1, 2, 4, ... capped at 30 seconds.
BACKOFF_FIRST_SECONDS = 1.0


BACKOFF_MAX_SECONDS = 30.0


def describe_error(exc: BaseException) -> str:
    """A short, credential-free description of a client error."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    name = type(exc).__name__
    if not text or text.startswith(name):
        return text or name  # kafka-python's errors already start with their name
    return f"{name}: {text}"


def attempts(count: int, last: BaseException) -> str:
    """How many attempts failed, and how the last one did."""
    if count == 1:
        return f"1 attempt: {describe_error(last)}"
    return f"{count} attempts, the last: {describe_error(last)}"


def gave_up(what: str, down: float, detail: str, limit: str) -> PeerUnreachableError:
    """The one line of a server given up on: the call, for how long, why, and the limit."""
    return PeerUnreachableError(
        f"{what}: unreachable for {down:.0f} s ({detail}); gave up ({limit}); "
        "a restart resumes from the checkpoint"
    )


def with_retries(
    what: str,
    call: Callable[[], T],
    stop: threading.Event,
    on_failure: Callable[[], None] = lambda: None,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    give_up_after: float | None = None,
    setting: str = "give_up_after",
    peer: str | None = None,
) -> T:
    """Call until it succeeds, warning and backing off (1 s doubling to 30 s) after each failure.

    Gives up when `stop` is set, with StopRequestedError: nothing is ever made up. With
    `give_up_after`, also once the calls have failed for that many seconds, counted from
    the start of the first failed one, with PeerUnreachableError: one line that says for
    how long and which `setting` to change. `peer` (kafka, postgres): each retried
    failure is counted on the Prometheus endpoint under that name.
    """
    attempt = 0
    down_since: float | None = None
    run: object | None = None  # the endpoint's token while a run of retries goes on
    try:
        while True:
            started = time.monotonic()
            try:
                result = call()
            except StreamingAppError:
                raise
            except retry_on as exc:
                attempt += 1
                down_since = started if down_since is None else down_since
                down = time.monotonic() - down_since
                if give_up_after is not None and down >= give_up_after:
                    limit = f"{setting} = {give_up_after:g} s"
                    raise gave_up(what, down, attempts(attempt, exc), limit) from None
                delay = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** (attempt - 1))
                if give_up_after is not None:  # one more attempt at the limit, not after it
                    delay = max(0.0, min(delay, give_up_after - down))
                log.warning(
                    "%s failed (attempt %d): %s; retrying in %.0f s",
                    what,
                    attempt,
                    describe_error(exc),
                    delay,
                )
                on_failure()
                if peer is not None:
                    count_retry(peer)
                    run = run or retry_began(peer)
                if stop.is_set() or stop.wait(delay):
                    raise StopRequestedError(f"stopping: gave up on {what}") from None
                continue
            if attempt:
                log.warning("%s succeeded after %d failed attempts", what, attempt)
            return result
    finally:
        if peer is not None:
            retry_ended(peer, run)
