"""The SparkContext both engines run on, made from today's settings before a checkpoint is read.

Driver side. Made before `StreamingContext.getOrCreate` (and before the SparkSession): a
DStream context recovered from a checkpoint then runs on it, since Spark's recovery takes
an active SparkContext over the settings stored in the checkpoint. So settings given at a
restart apply after recovery: a rotated secret, a metrics sink added later, another master.

Precedence, lowest first: the engine's defaults (and the preloaded Python worker daemon
on a local master, lifecycle/worker_daemon.py; the executors' UTF-8 locale,
common/jvm_locale.py); spark-defaults.conf and spark-submit's `--conf`; the engine's
required settings (`forced`, each replacement of a value of the user's said in one line);
the app's own Spark settings (`[spark]`, `--spark-conf`). On a cluster, C1 only is then
added after the executors' Java options, whoever set them (common/jvm_jit.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from streaming_app.common.jvm_jit import EXECUTOR_OPTIONS, executor_options
from streaming_app.common.jvm_locale import EXECUTOR_LOCALE, check_file_names
from streaming_app.errors import ConfigError
from streaming_app.lifecycle.driver_address import check_driver_address
from streaming_app.lifecycle.rest_server import warn_open_rest_server
from streaming_app.lifecycle.spark_secret import (
    SECRET_KEY,
    hold_secret,
    is_placeholder,
    secure_conf,
    verify_resolved,
)
from streaming_app.lifecycle.worker_daemon import DAEMON_MODULE, daemon_module
from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)

# Set by Spark or its launcher at every start, never a setting of the user's.
_VOLATILE = frozenset(
    {
        "spark.app.id",
        "spark.app.startTime",
        "spark.app.submitTime",
        "spark.app.initial.file.urls",
        "spark.app.initial.jar.urls",
        "spark.driver.host",
        "spark.driver.port",
        "spark.executor.id",
        "spark.files",
        "spark.repl.local.jars",
        "spark.submit.pyFiles",
        "spark.ui.showConsoleProgress",
        # Set by the app itself in the live conf when a stop begins (dstream/stopping.py
        # `set_graceful_stop_timeout`), so a checkpoint written after it records it.
        "spark.streaming.gracefulStopTimeout",
    }
)


def resolve_settings(
    given: Mapping[str, str],
    config: AppConfig,
    defaults: Mapping[str, str],
    forced: Mapping[str, tuple[str, str]],
) -> tuple[dict[str, str], list[str]]:
    """The settings to start Spark with, and a line for each value of the user's replaced.

    `given` is what spark-defaults.conf and spark-submit's --conf set (the launch's
    SparkConf); `defaults` apply where it is silent; `forced` maps a key to (value, why)
    for settings the engine needs whatever those files say; the app's own Spark settings
    (config.spark_conf) win over all.
    """
    settings = dict(given)
    master = settings.get("spark.master", config.master)
    # Executors decode file names as UTF-8 whatever their worker's locale (jvm_locale.py).
    initial = {DAEMON_MODULE: daemon_module(master), **EXECUTOR_LOCALE, **defaults}
    for key, value in initial.items():
        settings.setdefault(key, value)
    own = dict(config.spark_conf)
    notes = []
    for key, (value, why) in forced.items():
        was = settings.get(key)
        if key not in own and was is not None and was != value and key not in _VOLATILE:
            notes.append(f"Spark setting {key}={value} replaces {was}: {why}")
        settings[key] = value
    settings.update(own)
    if not str(settings.get("spark.master", config.master)).startswith("local"):
        # A cluster's executor JVMs compile with C1 only, as the driver's (jvm_jit.py).
        options = executor_options(settings.get(EXECUTOR_OPTIONS))
        if options is not None:
            settings[EXECUTOR_OPTIONS] = options
    return settings, notes


def spark_context(
    config: AppConfig,
    defaults: Mapping[str, str],
    forced: Mapping[str, tuple[str, str]] | None = None,
) -> Any:
    """Get or create the SparkContext with today's settings (resolve_settings); returns it.

    Raises ConfigError (exit 2) for a secret that cannot be used (spark_secret.secure_conf),
    for the files source on a driver JVM that does not decode file names as UTF-8, and for a
    cluster driver that would advertise loopback (driver_address.check_driver_address).
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._active_spark_context is not None:
        return SparkContext._active_spark_context
    SparkContext._ensure_initialized()  # launches the JVM, or joins spark-submit's
    if config.source == "files":
        check_file_names(SparkContext._jvm)
    conf = SparkConf().setAppName(config.app_name)
    settings, notes = resolve_settings(dict(conf.getAll()), config, defaults, forced or {})
    for note in notes:
        log.info("%s", note)
    conf.setAll(list(settings.items()))
    secret = secure_conf(conf, config.spark_secret_file)
    if secret is not None:
        hold_secret(SparkContext._jvm, secret)
    master = str(conf.get("spark.master", config.master))
    # The JVM's own environment: conf/secure/spark-env.sh sets it there, under spark-submit.
    jvm: Any = SparkContext._jvm
    local_ip = jvm.java.lang.System.getenv("SPARK_LOCAL_IP")
    check_driver_address(master, dict(conf.getAll()), local_ip)
    warn_open_rest_server(master, dict(conf.getAll()))
    sc = SparkContext.getOrCreate(conf)
    if secret is not None:
        try:
            verify_resolved(SparkContext._jvm, secret, config.spark_secret_file)
        except ConfigError:
            sc.stop()
            raise
    if sc.uiWebUrl:  # the port moves on when 4040 is taken: say where it is
        log.info("Spark UI at %s", sc.uiWebUrl)
    return sc


def changed_settings(recorded: Mapping[str, str], today: Mapping[str, str]) -> list[str]:
    """The keys whose values differ between a checkpoint's settings and today's (sorted).

    Keys only: a value may be a credential.
    """
    keys = (set(recorded) | set(today)) - _VOLATILE

    def same(key: str) -> bool:
        before, now = recorded.get(key), today.get(key)
        if key == SECRET_KEY and is_placeholder(before) and is_placeholder(now):
            return True  # two runs' placeholders (each run has its own): no secret either
        return before == now

    return sorted(k for k in keys if not same(k))


def conf_pairs(java_pairs: Any) -> dict[str, str]:
    """A Scala Array[(String, String)] from py4j (a checkpoint's sparkConfPairs) as a dict."""
    return {str(pair._1()): str(pair._2()) for pair in java_pairs}
