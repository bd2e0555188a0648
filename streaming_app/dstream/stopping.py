"""Stopping the DStream context: waiting for a stop, the graceful stop, draining Kafka.

The stop request, the wait loop and the hard stop are both engines' (lifecycle/stopping.py).
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Any

from streaming_app.common.failure_text import java_summary
from streaming_app.common.health import running_tasks
from streaming_app.lifecycle.stopping import StopRequest, wait_for_stop
from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)


def await_stop(ssc: Any, stop: StopRequest, duration: float | None, checkpoint_dir: str) -> str:
    """Block until a stop is requested or the duration ends; raise if the stream fails."""
    from py4j.protocol import Py4JError

    return wait_for_stop(
        ssc.awaitTerminationOrTimeout, Py4JError, stop, duration,
        "the streaming context", "a batch", checkpoint_dir,
        partial(running_tasks, ssc.sparkContext),
    )  # fmt: skip


def set_graceful_stop_timeout(ssc: Any, seconds: float) -> None:
    """Spark's own bound on a graceful stop, read from the live conf when a stop starts.

    Set at run time, not in the factory: a checkpoint would keep the value it was made with.
    """
    try:
        ssc.sparkContext._conf.set(
            "spark.streaming.gracefulStopTimeout", f"{max(round(seconds * 1000), 1)}ms"
        )
    except Exception as exc:  # a private attribute (docs/internals.md): Spark's bound applies
        log.warning(
            "could not set spark.streaming.gracefulStopTimeout (%s); Spark's own bound on a "
            "graceful stop applies, and the hard stop after stop_timeout still ends the run",
            type(exc).__name__,
        )


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
