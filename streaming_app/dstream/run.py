"""The DStream engine's entrypoint: getOrCreate the context, run it, stop it on request."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable

from streaming_app.common.failure_text import java_summary
from streaming_app.common.fs import is_local_path
from streaming_app.common.internals import check_internals
from streaming_app.common.output_errors import silence_spark_log
from streaming_app.common.spark_env import launching_jvm, prepare_spark_env
from streaming_app.dstream.stopping import (
    await_stop,
    drain_kafka,
    set_graceful_stop_timeout,
    stop_within,
)
from streaming_app.errors import EXIT_OK, StreamingAppError, StreamingFailedError
from streaming_app.lifecycle.checks import (
    check_checkpoint_location,
    check_paths,
    effective_master,
    say_default_checkpoint,
)
from streaming_app.lifecycle.serving_metrics import serving_metrics
from streaming_app.lifecycle.spark_secret import check_secret_file
from streaming_app.lifecycle.stopping import StopRequest, hard_stop, stream_failure
from streaming_app.recovery.checkpoint_lock import hold_for_run
from streaming_app.settings.schema import AppConfig
from streaming_app.state.figures import FIGURES

log = logging.getLogger(__name__)


def _check_restore_path(config: AppConfig) -> None:
    """A restore from a mistyped local path fails before Spark starts (exit 2)."""
    path = config.restore_from_snapshot
    if not path or not is_local_path(path) or not is_local_path(config.checkpoint_dir):
        return
    from streaming_app.common.fs import LocalFs
    from streaming_app.recovery.guard import has_checkpoint, seed_at

    if not has_checkpoint(LocalFs(), config.checkpoint_dir):  # else: already restored
        seed_at(path)


def run(config: AppConfig, quiesce: Callable[[], None] | None = None) -> int:
    """Run the app until stopped; returns the exit code (raises StreamingAppError on failure).

    `quiesce`, if given, is called when a graceful stop begins, before the context stops:
    a caller that feeds the source itself (the demo) stops sending there.
    """
    with serving_metrics(config):
        return _run(config, quiesce)


def _run(config: AppConfig, quiesce: Callable[[], None] | None) -> int:
    check_secret_file(config.spark_secret_file)  # first: a mistake there writes nothing
    check_paths(config)
    check_internals(kafka=config.source == "kafka")  # docs/internals.md
    _check_restore_path(config)
    for note in config.advisories():
        log.warning("%s", note)
    prepare_spark_env(config.master, config.spark_conf_dir)
    check_checkpoint_location(config, *effective_master(config))
    warnings.filterwarnings("ignore", message="DStream is deprecated", category=FutureWarning)

    from streaming_app.dstream.listener import LoggingListener
    from streaming_app.dstream.startup import start_streaming, stop_quietly

    stop = StopRequest()
    stop.install()
    # The state's keys and words per batch: one small job a batch no sink ran already.
    FIGURES.wanted = bool(config.metrics_file) or config.metrics_port is not None
    if config.source == "kafka":
        from streaming_app.sources.kafka.runtime import configure_runtime

        configure_runtime(config, stop.event)
    if "postgres" in config.sinks:
        from streaming_app.sinks.postgres.stream import prepare_postgres

        prepare_postgres(config, stop.event)  # a table that does not suit ends it in one line
    hold_for_run(config.checkpoint_dir)  # `checkpoint scrub` refuses while a run holds it
    say_default_checkpoint(config)
    try:
        with launching_jvm(), stop.through_start():
            ssc = start_streaming(config, lambda until: LoggingListener.for_config(config, until))
    except StreamingAppError:
        raise
    except Exception as exc:  # start() rejected the graph or could not restore it
        if stop.event.is_set():  # e.g. recovery waited for an unreachable broker
            log.info("Stopped while starting (%s): %s", stop.reason, java_summary(exc))
            return EXIT_OK
        error = stream_failure(exc)
        if isinstance(error, StreamingFailedError):
            error = StreamingFailedError(f"could not start streaming: {java_summary(exc)}")
        raise error from None
    # Also bounds the JVM's own graceful stop when a signal reaches it directly (under
    # spark-submit, the JVM's SIGTERM).
    set_graceful_stop_timeout(ssc, config.stop_timeout)
    try:
        reason = await_stop(ssc, stop, config.duration, config.checkpoint_dir)
    except StreamingAppError:
        # The run ends with the error's one line; the jobs this stop interrupts would each
        # log their interruption with a stack trace.
        silence_spark_log(ssc.sparkContext)
        # A call still waiting for a server (the next batch's planning, after the broker
        # was given up on) gives up now: the stop below waits for it.
        stop.event.set()
        stop_quietly(ssc)
        raise
    deadline = time.monotonic() + config.stop_timeout
    log.info(
        "Stopping gracefully (%s): finishing the batches in flight (up to stop_timeout=%g s)",
        reason,
        config.stop_timeout,
    )
    if quiesce is not None:
        quiesce()
    if config.source == "kafka":
        drain_kafka(ssc, config, deadline)
    if not stop_within(ssc, deadline):
        log.warning(
            "the batches in flight did not finish within stop_timeout=%g s; stopping hard. "
            "Nothing is lost: the restart recomputes them from the checkpoint",
            config.stop_timeout,
        )
        hard_stop(ssc)
    log.info("Stopped")
    return EXIT_OK
