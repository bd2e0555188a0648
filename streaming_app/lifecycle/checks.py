"""Start-up checks both engines make before Spark starts: paths, master, Kafka's TLS.

Driver side, before any Spark context exists (effective_master connects to spark-submit's
JVM when there is one). Each check raises ConfigError (exit 2) naming the setting: the
directories and the metrics file, the master and checkpoint location, and with a Kafka
source its TLS files and the certificate of a broker that answers.
"""

from __future__ import annotations

import logging
import os
import shlex
import tempfile
from typing import Any

from streaming_app.common.fs import is_local_path
from streaming_app.common.spark_env import under_spark_submit
from streaming_app.errors import ConfigError
from streaming_app.settings.schema import SETTINGS, AppConfig
from streaming_app.sources.kafka.client import KafkaConnection, check_broker
from streaming_app.sources.kafka.tls import check_tls_files

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


def check_paths(config: AppConfig) -> None:
    """The directories a run writes or reads, its metrics file, the Kafka TLS files, the
    certificate of a broker that answers and whether it takes the SASL credentials
    (ConfigError, exit 2); Kafka's first, so that a mistake there writes nothing."""
    if config.source == "kafka":
        connection = KafkaConnection.from_config(config)
        check_tls_files(connection)
        check_broker(connection)
    ensure_writable_dir("checkpoint_dir", config.checkpoint_dir)
    if "files" in config.sinks and config.output_dir:
        ensure_writable_dir("output_dir", config.output_dir)
    if config.source == "files" and config.input_dir:
        ensure_readable_dir("input_dir", config.input_dir)
    if config.metrics_file:
        check_metrics_file(config.metrics_file)


def say_default_checkpoint(config: AppConfig) -> None:
    """One line saying where the checkpoint goes when checkpoint_dir was left at its
    default (a relative `checkpoint`, wherever the run was started)."""
    default = os.path.abspath(SETTINGS["checkpoint_dir"].default)
    if config.checkpoint_dir in (SETTINGS["checkpoint_dir"].default, default):
        log.info(
            "the checkpoint is %s (checkpoint_dir's default: ./checkpoint where the run "
            "started; --checkpoint-dir sets it)",
            default,
        )
