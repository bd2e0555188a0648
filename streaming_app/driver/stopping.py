"""Stopping the running context: signals, waiting for a stop, graceful and hard stops."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from streaming_app.common.failure_text import failure_summary, failure_text, java_summary
from streaming_app.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CheckpointError,
    PeerUnreachableError,
    SinkError,
    SinkSetupError,
    SourceDataLostError,
    StreamingAppError,
    StreamingFailedError,
)
from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)


# How often the main thread wakes up to look for a stop request or the deadline.
POLL_SECONDS = 0.5


class StartInterruptedError(Exception):
    """Ctrl-C reached PySpark's own SIGINT handler while the context was being started."""


class StopRequest:
    """Set by SIGTERM/SIGINT; a second signal exits at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason = ""

    def install(self) -> None:
        """Route SIGTERM and SIGINT here (main thread only)."""
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.event.is_set():
            log.warning("second %s: exiting now without waiting for the batch in flight", name)
            os._exit(EXIT_INTERRUPTED)
        self.reason = name
        self.event.set()

    @contextmanager
    def through_start(self) -> Iterator[None]:
        """Keep SIGINT ours while Spark starts (main thread only).

        Creating a SparkContext replaces the SIGINT handler with PySpark's, which cancels
        every job and raises KeyboardInterrupt wherever the main thread is: a Ctrl-C would
        then abort the driver mid-call, leaving the JVM to stop on its own, with stack
        traces. This handler is put back once the context exists; a Ctrl-C that came
        before counts as a stop request (StartInterruptedError).
        """
        try:
            yield
        except KeyboardInterrupt:
            self.reason = self.reason or signal.SIGINT.name
            self.event.set()
            raise StartInterruptedError("interrupted while starting") from None
        finally:
            self.install()


# Our own errors raised in driver callbacks or tasks reach us as Java exceptions whose
# text holds the Python traceback; these keep their message and exit code.
_NO_RESTART_ERRORS = {
    "SourceDataLostError": SourceDataLostError,
    "CheckpointError": CheckpointError,
    "SinkError": SinkError,  # exit 1, but its own message says what to fix
    "SinkSetupError": SinkSetupError,  # a table or database that does not suit the job
    # Exit 1, restarted: its message names the server, its address and the outage's length.
    "PeerUnreachableError": PeerUnreachableError,
}


def stream_failure(exc: BaseException) -> StreamingAppError:
    """The error to exit with for a failure of the running stream."""
    text = failure_text(exc)
    for name, error in _NO_RESTART_ERRORS.items():
        match = re.search(rf"streaming_app\.errors\.{name}: (.+)", text)
        if match:
            return error(match.group(1).strip())
    return StreamingFailedError(
        f"streaming failed: {failure_summary(text)}; a restart resumes from the checkpoint"
    )


def await_stop(ssc: Any, stop: StopRequest, duration: float | None) -> str:
    """Block until a stop is requested or the duration ends; raise if the stream fails."""
    from py4j.protocol import Py4JError

    return wait_for_stop(
        ssc.awaitTerminationOrTimeout, Py4JError, stop, duration, "the streaming context", "a batch"
    )


def wait_for_stop(
    wait: Callable[[float], Any],
    failure: type[BaseException],
    stop: StopRequest,
    duration: float | None,
    stream: str,
    batch: str,
) -> str:
    """Either engine's wait: `wait(seconds)` returns whether the stream ended, or raises
    `failure` when it failed; returns the stop's reason, or raises StreamingFailedError."""
    deadline = time.monotonic() + duration if duration else None
    while True:
        try:
            ended = wait(POLL_SECONDS)
        except failure as exc:
            if stop.event.is_set():
                # E.g. a batch that gave up waiting for the broker because of the stop.
                log.info("%s failed while stopping: %s", batch, java_summary(exc))
                return stop.reason
            raise stream_failure(exc) from None
        if stop.event.is_set():
            # Checked first: under spark-submit a signal sent to the whole process group
            # also makes the JVM stop the context itself (stopGracefullyOnShutdown).
            return stop.reason
        if ended:
            raise StreamingFailedError(f"{stream} stopped unexpectedly")
        if deadline is not None and time.monotonic() >= deadline:
            return f"duration of {duration:g} s reached"


def set_graceful_stop_timeout(ssc: Any, seconds: float) -> None:
    """Spark's own bound on a graceful stop, read from the live conf when a stop starts.

    Set at run time, not in the factory: a checkpoint would keep the value it was made with.
    """
    try:
        ssc.sparkContext._conf.set(
            "spark.streaming.gracefulStopTimeout", f"{max(round(seconds * 1000), 1)}ms"
        )
    except Exception:
        log.debug("could not set spark.streaming.gracefulStopTimeout", exc_info=True)


def stop_within(ssc: Any, deadline: float) -> bool:
    """Stop the context gracefully; False if that is still going on at the deadline."""
    remaining = max(deadline - time.monotonic(), 1.0)
    set_graceful_stop_timeout(ssc, remaining)

    def stop() -> None:
        try:
            ssc.stop(stopSparkContext=True, stopGraceFully=True)
        except Exception as exc:  # the JVM got the signal too and is already going down
            log.warning("Spark was already shutting down: %s", java_summary(exc))

    # A daemon thread: a batch stuck in a sink must not keep the process alive.
    stopper = threading.Thread(target=stop, name="graceful-stop", daemon=True)
    stopper.start()
    stopper.join(remaining)
    return not stopper.is_alive()


def hard_stop(ssc: Any) -> None:
    """End the JVM now (its batches in flight with it) and exit without more waiting."""
    gateway = getattr(ssc.sparkContext, "_gateway", None)
    jvm = getattr(gateway, "proc", None)
    log.info("Stopped (hard)")
    logging.shutdown()
    # Threads still talking to the JVM would print its disappearance as tracebacks.
    logging.disable(logging.CRITICAL)
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    if jvm is not None:
        jvm.kill()  # its graceful shutdown hook would wait on the stuck batch again
        jvm.wait()
    os._exit(EXIT_OK)


def drain_kafka(ssc: Any, config: AppConfig, deadline: float) -> None:
    from streaming_app.sources.kafka.runtime import drain

    timeout = 2 * config.checkpoint_ms / 1000 + 4 * config.batch_interval + 10
    # At most two thirds of what is left: the graceful stop itself needs the rest.
    timeout = max(min(timeout, (deadline - time.monotonic()) * 2 / 3), 0.0)
    log.info(
        "taking no new Kafka records; waiting (up to %.0f s) for the state checkpoint that "
        "covers the last batch read, so that the restart re-reads nothing",
        timeout,
    )
    if not drain(timeout, lambda: bool(ssc.awaitTerminationOrTimeout(0.1))):
        log.warning(
            "no state checkpoint covered the last batch in time; the restart will re-read "
            "the batches since the last one (exactly: from the offset log)"
        )
