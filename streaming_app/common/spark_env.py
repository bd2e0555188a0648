"""The environment PySpark reads when it launches a JVM: conf dir, master, Python, loopback."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from streaming_app.common import jvm_archive
from streaming_app.common.jvm_jit import jit_env
from streaming_app.common.jvm_locale import utf8_env


def repo_conf_dir() -> str | None:
    """The `conf/` directory of a source checkout (or editable install), if there is one."""
    candidate = Path(__file__).resolve().parents[2] / "conf"
    return str(candidate) if (candidate / "spark-defaults.conf").is_file() else None


def under_spark_submit() -> bool:
    """Whether spark-submit launched us (it then owns the JVM, master and conf)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def prepare_spark_env(master: str, spark_conf_dir: str | None) -> None:
    """Set the environment PySpark reads when it launches the JVM (only if we launch it)."""
    if under_spark_submit():
        return
    # Workers must run this interpreter, which has streaming_app and its deps installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf_dir = spark_conf_dir or os.environ.get("SPARK_CONF_DIR") or repo_conf_dir()
    if conf_dir:
        os.environ["SPARK_CONF_DIR"] = conf_dir
    if master.startswith("local"):
        # Servers bind to loopback unless told otherwise.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        # The master must be a JVM system property: on recovery Spark rebuilds the
        # SparkConf from the checkpoint and takes only spark.master from the launch.
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--master {shlex.quote(master)} pyspark-shell"


@contextmanager
def launching_jvm() -> Iterator[None]:
    """A JVM that PySpark launches meanwhile ignores SIGTERM, and starts from the class archive.

    SIGTERM: a SIGTERM sent to the whole process group (`kill -- -PGID`, a service
    manager) would also run the JVM's shutdown hooks, which stop the streaming context and
    then the executors while the driver is still finishing its own graceful stop: tasks
    are rejected or lose their Python workers, with pages of errors. PySpark keeps SIGINT
    from its JVM the same way; the JVM still ends with the driver (its stdin closes) and
    on SIGKILL.

    The locale (jvm_locale.py): a UTF-8 one when the caller's is not, so that the JVM
    decodes file names as UTF-8 (under LC_ALL=C it would read them as ASCII).

    HotSpot's C1 compiler only (jvm_jit.py).

    The class archive (jvm_archive.py), when there is one for the repository's conf/:
    the JVM alone gets the launch options and the empty conf directory it needs; this
    process and the ones it starts keep SPARK_CONF_DIR as it was.

    Under spark-submit the JVM exists already and this does nothing.
    """
    from pyspark import java_gateway

    gateway: Any = java_gateway  # its Popen, which launches the JVM
    launch = gateway.Popen

    def popen(command: Any, *args: Any, **kwargs: Any) -> Any:
        inner = kwargs.get("preexec_fn")

        def preexec() -> None:  # in the child, before exec: an ignored signal stays so
            if inner is not None:
                inner()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        if isinstance(kwargs.get("env"), dict):
            kwargs["env"] = utf8_env(kwargs["env"])
        if isinstance(command, list) and isinstance(kwargs.get("env"), dict):
            command, kwargs["env"] = jvm_archive.launch(command, kwargs["env"], repo_conf_dir())
            kwargs["env"] = jit_env(kwargs["env"])
        return launch(command, *args, **kwargs)

    gateway.Popen = popen
    try:
        yield
    finally:
        gateway.Popen = launch
