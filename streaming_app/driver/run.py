"""The entrypoint: getOrCreate the streaming context, run it, and stop it on request."""

from __future__ import annotations

import logging
import os
import shlex
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

from streaming_app.common.failure_text import java_summary
from streaming_app.common.output_errors import silence_spark_log
from streaming_app.common.spark_env import (
    jvm_ignoring_sigterm,
    prepare_spark_env,
    under_spark_submit,
)
from streaming_app.driver.stopping import (
    StopRequest,
    await_stop,
    drain_kafka,
    hard_stop,
    set_graceful_stop_timeout,
    stop_within,
    stream_failure,
)
from streaming_app.errors import (
    EXIT_OK,
    ConfigError,
    StreamingAppError,
    StreamingFailedError,
)
from streaming_app.settings.schema import AppConfig, is_local_path

log = logging.getLogger(__name__)


def ensure_writable_dir(key: str, path: str) -> None:
    """Create a local directory if needed and prove it is writable, or raise ConfigError."""
    if not is_local_path(path):
        return  # HDFS/S3: checked by Spark when it writes
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as exc:
        raise ConfigError(f"{key} {path}: not writable ({exc.strerror or exc})") from None


def ensure_readable_dir(key: str, path: str) -> None:
    """Create a local directory if missing and check it can be listed, or raise ConfigError."""
    if not is_local_path(path):
        return
    try:
        os.makedirs(path, exist_ok=True)
        os.listdir(path)
    except OSError as exc:
        raise ConfigError(f"{key} {path}: not readable ({exc.strerror or exc})") from None


def _check_restore_path(config: AppConfig) -> None:
    """A restore from a mistyped local path fails before Spark starts (exit 2)."""
    path = config.restore_from_snapshot
    if not path or not is_local_path(path) or not is_local_path(config.checkpoint_dir):
        return
    from streaming_app.common.fs import LocalFs
    from streaming_app.recovery.guard import has_checkpoint, seed_at

    if not has_checkpoint(LocalFs(), config.checkpoint_dir):  # else: already restored
        seed_at(path)


def check_metrics_file(path: str) -> None:
    """A metrics file the driver can append to: a local path in a writable directory (exit 2)."""
    if not is_local_path(path):
        raise ConfigError(f"metrics_file {path}: must be a local path (the driver appends to it)")
    ensure_writable_dir("metrics_file", os.path.dirname(os.path.abspath(path)))


def effective_master(config: AppConfig) -> tuple[str, str]:
    """The master Spark will use and the default filesystem of paths without a scheme.

    Under spark-submit both come from its JVM (--master, HADOOP_CONF_DIR); otherwise the
    master is ours and such paths are local.
    """
    if not under_spark_submit():
        # prepare_spark_env keeps a PYSPARK_SUBMIT_ARGS that was set: its --master wins.
        args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
        given = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--master"]
        return (given[-1] if given else config.master), "file:///"
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    jvm: Any = SparkContext._jvm
    master = jvm.System.getProperty("spark.master") or config.master
    default_fs = jvm.org.apache.hadoop.conf.Configuration().get("fs.defaultFS") or "file:///"
    return str(master), str(default_fs)


def check_checkpoint_location(config: AppConfig, master: str, default_fs: str) -> None:
    """Refuse a local checkpoint directory for a cluster unless it is allowed (exit 2).

    Executors write the state checkpoint: on other machines a local path silently
    splits it over their disks and recovery finds a partial checkpoint.
    """
    path = config.checkpoint_dir
    if master.startswith("local"):
        return
    if not path.startswith("file:") and not (
        is_local_path(path) and default_fs.startswith("file:")
    ):
        return  # hdfs://, s3a://, or a path without a scheme on a shared default filesystem
    if config.allow_local_checkpoint:
        log.warning(
            "checkpoint_dir %s is a local path with master %s: correct only if every "
            "node mounts it at the same path (allow_local_checkpoint = true)",
            config.checkpoint_dir,
            master,
        )
        return
    raise ConfigError(
        f"checkpoint_dir {config.checkpoint_dir}: a local path, but master {master} runs "
        "executors on other machines; use storage they share (hdfs://..., s3a://...), or "
        "set allow_local_checkpoint = true (--allow-local-checkpoint) if every node mounts "
        "this path"
    )


def run(config: AppConfig, quiesce: Callable[[], None] | None = None) -> int:
    """Run the app until stopped; returns the exit code (raises StreamingAppError on failure).

    `quiesce`, if given, is called when a graceful stop begins, before the context stops:
    a caller that feeds the source itself (the demo) stops sending there.
    """
    ensure_writable_dir("checkpoint_dir", config.checkpoint_dir)
    if "files" in config.sinks and config.output_dir:
        ensure_writable_dir("output_dir", config.output_dir)
    if config.source == "files" and config.input_dir:
        ensure_readable_dir("input_dir", config.input_dir)
    _check_restore_path(config)
    if config.metrics_file:
        check_metrics_file(config.metrics_file)
    for note in config.advisories():
        log.warning("%s", note)
    prepare_spark_env(config.master, config.spark_conf_dir)
    check_checkpoint_location(config, *effective_master(config))
    warnings.filterwarnings("ignore", message="DStream is deprecated", category=FutureWarning)

    from streaming_app.driver.listener import LoggingListener
    from streaming_app.driver.startup import start_streaming, stop_quietly

    stop = StopRequest()
    stop.install()
    if config.source == "kafka":
        from streaming_app.sources.kafka.runtime import configure_runtime

        configure_runtime(config, stop.event)
    if "postgres" in config.sinks:
        from streaming_app.sinks.postgres.stream import check_tables, configure_postgres

        configure_postgres(config.postgres_dsn, stop.event, config.postgres_give_up_after)
        # Before Spark starts: a table that does not suit the job ends the run in one line.
        check_tables(config.postgres_table, numeric=config.job == "keyed-sum")
    try:
        with jvm_ignoring_sigterm(), stop.through_start():
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
        reason = await_stop(ssc, stop, config.duration)
    except StreamingAppError:
        # The run ends with the error's one line; the jobs this stop interrupts would each
        # log their interruption with a stack trace.
        silence_spark_log(ssc.sparkContext)
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
