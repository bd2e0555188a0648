"""The stop of a run, either engine's: the stop request (signals), waiting for it, the hard stop.

Driver side. The request is set by SIGTERM/SIGINT; the wait polls the engine's own
"has the stream ended" call and turns its failure into the app's error; the hard stop
ends the JVM when a graceful stop did not finish in time.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from streaming_app.common.failure_text import failure_summary, failure_text, java_summary
from streaming_app.common.metrics_recorder import note_stopping
from streaming_app.common.prometheus import beat, begin_stop, failed
from streaming_app.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CheckpointError,
    ConfigError,
    PeerUnreachableError,
    SinkError,
    SinkSetupError,
    SourceDataLostError,
    StreamingAppError,
    StreamingFailedError,
)
from streaming_app.lifecycle.writable import unwritable

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
    # Exit 2: a setting found wrong mid-run (a Kafka broker's certificate, say).
    "ConfigError": ConfigError,
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


def wait_for_stop(
    wait: Callable[[float], Any],
    failure: type[BaseException],
    stop: StopRequest,
    duration: float | None,
    stream: str,
    batch: str,
    checkpoint_dir: str | None = None,
    tasks: Callable[[], Hashable] | None = None,
) -> str:
    """Either engine's wait: `wait(seconds)` returns whether the stream ended, or raises
    `failure` when it failed; returns the stop's reason, or raises StreamingFailedError
    (one that names the checkpoint directory when it cannot be written now). `tasks`
    reads the running stages' tasks for `/healthz` (common/health.py)."""
    deadline = time.monotonic() + duration if duration else None
    while True:
        try:
            ended = wait(POLL_SECONDS)
            beat(tasks)  # the JVM answered: /healthz
        except failure as exc:
            if stop.event.is_set():
                # E.g. a batch that gave up waiting for the broker because of the stop.
                log.info("%s failed while stopping: %s", batch, java_summary(exc))
                return _stopping(stop.reason)
            raise _checkpoint_failure(stream_failure(exc), checkpoint_dir) from None
        if stop.event.is_set():
            # Checked first: under spark-submit a signal sent to the whole process group
            # also makes the JVM stop the context itself (stopGracefullyOnShutdown).
            return _stopping(stop.reason)
        if ended:
            raise StreamingFailedError(f"{stream} stopped unexpectedly")
        if deadline is not None and time.monotonic() >= deadline:
            return _stopping(f"duration of {duration:g} s reached")


def _checkpoint_failure(error: StreamingAppError, checkpoint_dir: str | None) -> StreamingAppError:
    """`error`, or, when the stream failed where the checkpoint directory cannot be written
    now (a full disk, a permission: lifecycle/writable.py), the error that says so and what
    to do, counted as a failed checkpoint."""
    if checkpoint_dir is None or type(error) is not StreamingFailedError:
        return error  # one of the app's own errors already says what to fix
    reason = unwritable(checkpoint_dir)
    if reason is None:
        return error
    failed("checkpoint")
    return StreamingFailedError(
        f"streaming failed: the checkpoint directory {checkpoint_dir} cannot be written "
        f"({reason}); free space there or fix its permissions: a restart then resumes "
        "from the checkpoint"
    )


def _stopping(reason: str) -> str:
    """A stop begins for `reason`: the batches that drain now are not a job falling
    behind, and the endpoint says the driver's disappearance is intended."""
    note_stopping()
    begin_stop()
    return reason


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
