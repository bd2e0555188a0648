"""The structured engine's entrypoint: start (or resume) the query, run it, stop it on request.

Driver side. The start-up checks and the stop request are both engines' (lifecycle/); what
differs is the query's lifecycle: a graceful stop lets the micro-batch in flight finish,
then stops the query between micro-batches.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from streaming_app.common.failure_text import failure_text, java_summary
from streaming_app.common.health import running_tasks
from streaming_app.common.internals import check_internals
from streaming_app.common.output_errors import silence_spark_log
from streaming_app.common.spark_env import launching_jvm, prepare_spark_env
from streaming_app.errors import EXIT_OK, StreamingAppError, StreamingFailedError
from streaming_app.lifecycle.checks import (
    check_checkpoint_location,
    check_paths,
    effective_master,
    say_default_checkpoint,
)
from streaming_app.lifecycle.serving_metrics import serving_metrics
from streaming_app.lifecycle.spark_secret import check_secret_file
from streaming_app.lifecycle.stopping import (
    StopRequest,
    hard_stop,
    stream_failure,
    wait_for_stop,
)
from streaming_app.settings.schema import AppConfig
from streaming_app.structured.requirements import check_supported, require_extra

log = logging.getLogger(__name__)


def stop_between_batches(spark: Any, query: Any, deadline: float) -> bool:
    """Stop the query once no micro-batch runs; False if it could not be stopped by the deadline.

    A micro-batch that starts between the last look and the stop is interrupted: the
    restart runs it again from the offsets log (nothing is lost, nothing counted twice).
    """
    while query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)
    if query.status.get("isTriggerActive"):
        return False
    remaining_ms = max(round((deadline - time.monotonic()) * 1000), 1000)
    spark.conf.set("spark.sql.streaming.stopTimeout", str(remaining_ms))
    try:
        query.stop()
    except Exception as exc:  # the stop timed out
        log.warning("the query did not stop in time: %s", java_summary(exc))
        return False
    return True


def await_any(queries: list[Any], seconds: float) -> bool:
    """Whether a query ended within `seconds` (the first one waited on); raises its failure.

    A failure that is not one of the app's own errors is logged here with its whole trace
    (conf/log4j2.properties keeps Spark from reporting a failed query: the app's own
    errors end the run with their one line)."""
    try:
        for query in queries[1:]:
            if not query.isActive:
                return bool(query.awaitTermination(0.001))
        return bool(queries[0].awaitTermination(seconds))
    except Exception as exc:
        if isinstance(stream_failure(exc), StreamingFailedError):
            log.error("the streaming query failed: %s", failure_text(exc), exc_info=exc)
        raise


def run(config: AppConfig) -> int:
    """Run the structured engine until stopped; returns the exit code (raises on failure)."""
    with serving_metrics(config):
        return _run(config)


def _run(config: AppConfig) -> int:
    require_extra()
    check_supported(config)
    check_secret_file(config.spark_secret_file)  # first: a mistake there writes nothing
    check_paths(config)
    check_internals(kafka=config.source == "kafka")  # docs/internals.md
    prepare_spark_env(config.master, config.spark_conf_dir)
    master, default_fs = effective_master(config)
    check_checkpoint_location(config, master, default_fs)

    from streaming_app.structured.listener import attach_listener
    from streaming_app.structured.query import start_query
    from streaming_app.structured.session import build_session

    stop = StopRequest()
    stop.install()
    if "postgres" in config.sinks:
        from streaming_app.sinks.postgres.stream import prepare_postgres

        # The DStream sink's writer, with today's DSN: in this process's memory only.
        prepare_postgres(config, stop.event)  # a table that does not suit ends it in one line
    say_default_checkpoint(config)
    try:
        with launching_jvm(), stop.through_start():
            spark = build_session(config)
            attach_listener(spark, config)
            query = start_query(spark, config)
            queries = [query]
            if config.window is not None:
                from streaming_app.structured.windows import start_window_query

                queries.append(start_window_query(spark, config))
    except StreamingAppError:
        raise
    except Exception as exc:  # Spark refused the query or its checkpoint
        if stop.event.is_set():
            log.info("Stopped while starting (%s): %s", stop.reason, java_summary(exc))
            return EXIT_OK
        raise StreamingFailedError(f"could not start the query: {java_summary(exc)}") from None
    try:
        reason = wait_for_stop(
            # StreamingQueryException (a micro-batch failed) has no common base but Exception.
            partial(await_any, queries), Exception, stop, config.duration,
            "the streaming query", "a micro-batch", config.checkpoint_dir,
            partial(running_tasks, spark.sparkContext),
        )  # fmt: skip
    except StreamingAppError:
        # The run ends with the error's one line: Spark would log the failed micro-batch
        # and every task the stop interrupts with a stack trace.
        silence_spark_log(spark.sparkContext)
        spark.stop()
        raise
    log.info(
        "Stopping gracefully (%s): finishing the micro-batch in flight (up to stop_timeout=%g s)",
        reason,
        config.stop_timeout,
    )
    deadline = time.monotonic() + config.stop_timeout
    if not all([stop_between_batches(spark, each, deadline) for each in queries]):
        log.warning(
            "the micro-batch in flight did not finish within stop_timeout=%g s; stopping hard. "
            "Nothing is lost: the restart runs it again from the checkpoint",
            config.stop_timeout,
        )
        hard_stop(spark)
    quiet_state_store_maintenance(spark.sparkContext)
    spark.stop()
    log.info("Stopped")
    return EXIT_OK


# Spark's state store maintenance runs on a timer of its own (session.py: every 2 s); one
# that fires while `spark.stop()` tears the JVM down logs a warning with a stack trace
# (StateStore's `SparkEnv not active, cannot do maintenance on StateStores`, or
# RocksDBStateStoreProvider's `Ignoring error while performing snapshot maintenance` when
# its report of an uploaded snapshot meets the driver's RPC endpoint already stopped: a
# RejectedExecutionException, seen in CI's test_postgres_tls run of 2026-11-30). The
# queries have stopped by then: there is nothing left to maintain, and the next start
# maintains the store. The package's logger covers every state store class.
STATE_STORE_LOGGER = "org.apache.spark.sql.execution.streaming.state"


def quiet_state_store_maintenance(sc: Any) -> None:
    """Only errors from Spark's state store logger from now on (log4j2's Configurator)."""
    try:
        jvm = sc._jvm
        level = jvm.org.apache.logging.log4j.Level.ERROR
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(STATE_STORE_LOGGER, level)
    except Exception:  # a stopped JVM: nothing is left to log
        log.debug("could not quiet the state store's log", exc_info=True)
