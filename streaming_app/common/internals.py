"""The check at start of the private parts of PySpark and kafka-python the app uses.

Driver side, before Spark starts. docs/internals.md lists each reach, what it does and
why nothing public does it. Here each one the app cannot do without is looked for in the
installed packages: one missing is one line and exit 2, naming the module of the app that
needs it, rather than a traceback mid-run; a version other than those the reaches were
checked against is one warning.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

from streaming_app.errors import ConfigError

log = logging.getLogger(__name__)

# The versions (major.minor) docs/internals.md was checked against.
CHECKED = {"pyspark": "4.3", "kafka-python": "3.0"}


def _has(module: str, *path: str) -> Callable[[], bool]:
    def found() -> bool:
        thing: object = importlib.import_module(module)
        for name in path:
            if not hasattr(thing, name):
                return False
            thing = getattr(thing, name)
        return True

    return found


def _init_takes(module: str, cls: str, parameter: str) -> Callable[[], bool]:
    """A class whose __init__ takes `parameter` (it keeps it as a private attribute)."""

    def found() -> bool:
        init = getattr(importlib.import_module(module), cls).__init__
        return parameter in inspect.signature(init).parameters

    return found


def _record_batch_fields() -> bool:
    """A v2 record batch built with the installed kafka-python, read back, still keeps its
    bytes and its records' start where the lean decoding reads them (`_buffer`, `_pos`)."""
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1024,
    )  # fmt: skip
    builder.append(0, timestamp=None, key=None, value=b"probe", headers=[])
    batch = DefaultRecordBatch(bytes(builder.build()))
    iter(batch)  # as the lean decoding does: decompresses into the buffer
    return isinstance(getattr(batch, "_buffer", None), (bytes, bytearray, memoryview)) and (
        isinstance(getattr(batch, "_pos", None), int)
    )


# (what the app uses, the app's module that needs it, how to tell it is there).
SPARK_REACHES = [
    ("pyspark.java_gateway.Popen", "common/spark_env.py", _has("pyspark.java_gateway", "Popen")),
    ("pyspark.daemon.manager", "lifecycle/worker_daemon.py", _has("pyspark.daemon", "manager")),
    (
        "SparkContext._active_spark_context, _ensure_initialized, _jvm, _gateway",
        "lifecycle/spark_context.py",
        lambda: all(
            _has("pyspark", "SparkContext", name)()
            for name in ("_active_spark_context", "_ensure_initialized", "_jvm", "_gateway")
        ),
    ),
    ("RDD._jrdd", "sources/files.py", _init_takes("pyspark", "RDD", "jrdd")),
    ("SparkContext._jsc", "common/hadoop_fs.py", _init_takes("pyspark", "SparkContext", "jsc")),
    (
        "StreamingContext._ensure_initialized",
        "recovery/spark_checkpoint.py",
        _has("pyspark.streaming", "StreamingContext", "_ensure_initialized"),
    ),
    (
        "DStream._jdstream, _jrdd_deserializer",
        "state/buckets.py",
        _init_takes("pyspark.streaming", "DStream", "jdstream"),
    ),
    (
        "StreamingContext._jssc",
        "dstream/startup.py",
        _init_takes("pyspark.streaming", "StreamingContext", "jssc"),
    ),
]
KAFKA_REACHES = [
    (
        "kafka.consumer.fetcher.Fetcher.PartitionRecords",
        "sources/kafka/records.py",
        _has("kafka.consumer.fetcher", "Fetcher", "PartitionRecords"),
    ),
    *(
        (
            f"kafka.consumer.fetcher.Fetcher.PartitionRecords.{method}",
            "sources/kafka/records.py",
            _has("kafka.consumer.fetcher", "Fetcher", "PartitionRecords", method),
        )
        for method in ("_unpack_records", "_maybe_skip_record")
    ),
    (
        "kafka.record.default_records.DefaultRecordBatch._buffer, _pos",
        "sources/kafka/records.py",
        _record_batch_fields,
    ),
]


def check_internals(kafka: bool) -> None:
    """Each private part the run needs is there (ConfigError, exit 2, if not); a warning
    for a PySpark or kafka-python of another version than those checked."""
    reaches = SPARK_REACHES + (KAFKA_REACHES if kafka else [])
    for what, where, found in reaches:
        try:
            there = found()
        except (ImportError, AttributeError, TypeError):  # gone, or no longer as used
            there = False
        if not there:
            package = "kafka-python" if what.startswith("kafka") else "pyspark"
            raise ConfigError(
                f"{package} {_version(package)} has no {what}, which the app's {where} "
                f"uses (docs/internals.md); install {package} {CHECKED[package]}.x"
            )
    for package in ("pyspark",) + (("kafka-python",) if kafka else ()):
        installed = _version(package)
        if not installed.startswith(CHECKED[package] + "."):
            log.warning(
                "%s %s: the app's uses of its private parts were checked with %s.x "
                "(docs/internals.md); each was found, but watch for changes in behaviour",
                package,
                installed,
                CHECKED[package],
            )


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "(not installed)"
