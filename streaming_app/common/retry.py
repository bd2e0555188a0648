"""Retrying a call that needs a server (a broker, a database): backoff, warnings, stop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from streaming_app.errors import StopRequestedError, StreamingAppError

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


def with_retries(
    what: str,
    call: Callable[[], T],
    stop: threading.Event,
    on_failure: Callable[[], None] = lambda: None,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
) -> T:
    """Call until it succeeds, warning and backing off (1 s doubling to 30 s) after each failure.

    Gives up only when `stop` is set, with StopRequestedError: nothing is ever made up.
    """
    attempt = 0
    while True:
        try:
            result = call()
        except StreamingAppError:
            raise
        except retry_on as exc:
            attempt += 1
            delay = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** (attempt - 1))
            log.warning(
                "%s failed (attempt %d): %s; retrying in %.0f s",
                what,
                attempt,
                describe_error(exc),
                delay,
            )
            on_failure()
            if stop.is_set() or stop.wait(delay):
                raise StopRequestedError(f"stopping: gave up on {what}") from None
            continue
        if attempt:
            log.warning("%s succeeded after %d failed attempts", what, attempt)
        return result
