"""App errors raised in a batch's output or planning, on the driver: one line, no Spark log."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from streaming_app.errors import StreamingAppError

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


def silence_spark_log(sc: SparkContext) -> None:
    """Turn the driver JVM's log off (its root level); the app's own log is Python's.

    And PySpark's accumulator server's: the stop that follows ends the JVM, whose
    connection to that server may be reset, and the server's thread would print the
    reset as a traceback on stderr, after the run's one line (seen on a give-up).
    """
    try:
        sc.setLogLevel("OFF")
    except Exception:  # a stopped context: nothing is left to log
        log.debug("could not turn Spark's log off", exc_info=True)
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = _connection_lost


def _connection_lost(request: object, client_address: object) -> None:
    """socketserver's handle_error, in debug: the run is ending on an error anyway."""
    log.debug("accumulator connection from %s ended", client_address, exc_info=True)


@contextmanager
def app_errors_in_one_line(sc: SparkContext) -> Iterator[None]:
    """Around a batch's output operation or its planning (a DStream transform), on the
    driver: a StreamingAppError still fails the batch, but Spark does not log it.

    Spark logs every failed output operation, and every failed job generation, with the
    Python traceback and a Java stack trace (JobScheduler's `Error running job ...`,
    `Error generating jobs for time ...`), then ends the run, which exits with the
    error's one `Error:` line. The batch stays failed (not done in the checkpoint, so
    a restart replays it); only the log is turned off, and the run is over anyway.
    """
    try:
        yield
    except StreamingAppError:
        silence_spark_log(sc)
        raise
