"""The entrypoint: getOrCreate the streaming context, run it, and stop it on request."""

from __future__ import annotations

import logging
import os
import re
import shlex
import signal
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from types import FrameType
from typing import Any

from streaming_app.config import AppConfig, is_local_path
from streaming_app.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CheckpointError,
    ConfigError,
    SinkError,
    SourceDataLostError,
    StreamingAppError,
    StreamingFailedError,
)

log = logging.getLogger(__name__)

# How often the main thread wakes up to look for a stop request or the deadline.
POLL_SECONDS = 0.5


def repo_conf_dir() -> str | None:
    """The `conf/` directory of a source checkout (or editable install), if there is one."""
    candidate = Path(__file__).resolve().parent.parent / "conf"
    return str(candidate) if (candidate / "spark-defaults.conf").is_file() else None


def under_spark_submit() -> bool:
    """Whether spark-submit launched us (it then owns the JVM, master and conf)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def prepare_spark_env(config: AppConfig) -> None:
    """Set the environment PySpark reads when it launches the JVM (only if we launch it)."""
    if under_spark_submit():
        return
    # Workers must run this interpreter, which has streaming_app and its deps installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf_dir = config.spark_conf_dir or os.environ.get("SPARK_CONF_DIR") or repo_conf_dir()
    if conf_dir:
        os.environ["SPARK_CONF_DIR"] = conf_dir
    if config.master.startswith("local"):
        # Servers bind to loopback unless told otherwise.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        # The master must be a JVM system property: on recovery Spark rebuilds the
        # SparkConf from the checkpoint and takes only spark.master from the launch.
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--master {shlex.quote(config.master)} pyspark-shell"


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


_EXCEPTION_LINE = re.compile(
    r"^(?::\s*)?((?:[A-Za-z_][\w$]*\.)*[A-Za-z_][\w$]*(?:Exception|Error)): (.+)"
)
# Exceptions that only wrap the one that says what went wrong.
_WRAPPERS = {"py4j.protocol.Py4JJavaError", "org.apache.spark.SparkException"}


def failure_summary(text: str) -> str:
    """One line for a Java/Python failure text: its innermost informative exception."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    causes = [m for line in lines if (m := _EXCEPTION_LINE.match(line))]
    informative = [m for m in causes if m.group(1) not in _WRAPPERS]
    if informative:
        last = informative[-1]
        return f"{last.group(1).rsplit('.', 1)[-1]}: {last.group(2)}"
    return lines[0] if lines else "unknown error"


def failure_text(exc: BaseException) -> str:
    """The text of a failure: the Java exception's, or the Python one's."""
    java = getattr(exc, "java_exception", None)
    return str(java.toString()) if java is not None else str(exc)


def ensure_readable_dir(key: str, path: str) -> None:
    """Create a local directory if missing and check it can be listed, or raise ConfigError."""
    if not is_local_path(path):
        return
    try:
        os.makedirs(path, exist_ok=True)
        os.listdir(path)
    except OSError as exc:
        raise ConfigError(f"{key} {path}: not readable ({exc.strerror or exc})") from None


def java_summary(exc: BaseException) -> str:
    """One line for any failure, Java or Python."""
    return failure_summary(failure_text(exc))


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


# Our own errors raised in driver callbacks or tasks reach us as Java exceptions whose
# text holds the Python traceback; these keep their message and exit code.
_NO_RESTART_ERRORS = {
    "SourceDataLostError": SourceDataLostError,
    "CheckpointError": CheckpointError,
    "SinkError": SinkError,  # exit 1, but its own message says what to fix
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

    deadline = time.monotonic() + duration if duration else None
    while True:
        try:
            ended = ssc.awaitTerminationOrTimeout(POLL_SECONDS)
        except Py4JError as exc:
            if stop.event.is_set():
                # E.g. a batch that gave up waiting for the broker because of the stop.
                log.info("a batch failed while stopping: %s", java_summary(exc))
                return stop.reason
            raise stream_failure(exc) from None
        if stop.event.is_set():
            # Checked first: a signal sent to the whole process group also makes the
            # JVM stop the context itself (stopGracefullyOnShutdown).
            return stop.reason
        if ended:
            raise StreamingFailedError("the streaming context stopped unexpectedly")
        if deadline is not None and time.monotonic() >= deadline:
            return f"duration of {duration:g} s reached"


def _check_restore_path(config: AppConfig) -> None:
    """A restore from a mistyped local path fails before Spark starts (exit 2)."""
    path = config.restore_from_snapshot
    if not path or not is_local_path(path) or not is_local_path(config.checkpoint_dir):
        return
    from streaming_app.fs import LocalFs
    from streaming_app.guard import has_checkpoint, seed_at

    if not has_checkpoint(LocalFs(), config.checkpoint_dir):  # else: already restored
        seed_at(path)


def _check_metrics_file(path: str) -> None:
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


def run(config: AppConfig) -> int:
    """Run the app until stopped; returns the exit code (raises StreamingAppError on failure)."""
    ensure_writable_dir("checkpoint_dir", config.checkpoint_dir)
    if "files" in config.sinks and config.output_dir:
        ensure_writable_dir("output_dir", config.output_dir)
    if config.source == "files" and config.input_dir:
        ensure_readable_dir("input_dir", config.input_dir)
    _check_restore_path(config)
    if config.metrics_file:
        _check_metrics_file(config.metrics_file)
    for note in config.advisories():
        log.warning("%s", note)
    prepare_spark_env(config)
    check_checkpoint_location(config, *effective_master(config))
    warnings.filterwarnings("ignore", message="DStream is deprecated", category=FutureWarning)

    from streaming_app.listener import LoggingListener
    from streaming_app.startup import start_streaming, stop_quietly

    stop = StopRequest()
    stop.install()
    if config.source == "kafka":
        from streaming_app.kafka_source import configure_runtime

        configure_runtime(config, stop.event)
    if "postgres" in config.sinks:
        from streaming_app.pg_output import configure_postgres

        configure_postgres(config.postgres_dsn, stop.event)
    try:
        ssc = start_streaming(config, lambda: LoggingListener.for_config(config))
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
    # Also bounds the JVM's own graceful stop when the signal reaches it directly (a
    # terminal's Ctrl-C goes to the whole process group).
    _set_graceful_stop_timeout(ssc, config.stop_timeout)
    try:
        reason = await_stop(ssc, stop, config.duration)
    except StreamingAppError:
        stop_quietly(ssc)
        raise
    deadline = time.monotonic() + config.stop_timeout
    log.info(
        "Stopping gracefully (%s): finishing the batches in flight (up to stop_timeout=%g s)",
        reason,
        config.stop_timeout,
    )
    if config.source == "kafka":
        _drain_kafka(ssc, config, deadline)
    if not stop_within(ssc, deadline):
        log.warning(
            "the batches in flight did not finish within stop_timeout=%g s; stopping hard. "
            "Nothing is lost: the restart recomputes them from the checkpoint",
            config.stop_timeout,
        )
        hard_stop(ssc)
    log.info("Stopped")
    return EXIT_OK


def _set_graceful_stop_timeout(ssc: Any, seconds: float) -> None:
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
    _set_graceful_stop_timeout(ssc, remaining)

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


def _drain_kafka(ssc: Any, config: AppConfig, deadline: float) -> None:
    from streaming_app.kafka_source import drain

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
