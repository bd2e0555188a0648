"""The SparkSession of the structured engine: the state store and partitions it is made with.

Driver side. Spark keeps a query's SQL settings in its checkpoint (the offsets log) from
the first run on: the state store provider and the number of shuffle (= state) partitions
set here apply to a new checkpoint; a restart keeps those it was made with.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from streaming_app.lifecycle.spark_context import spark_context
from streaming_app.settings.schema import AppConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# RocksDB, with changelog checkpointing: a micro-batch's commit writes only its changes
# (the store's files are uploaded in the background). Side by side on two cores, it cost
# what Spark's default in-memory store costs at 100,000 keys (20,000-line micro-batches,
# and a restart), and a fifth less at a million keys, with less JVM heap (docs).
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
# Every total (a files base, a snapshot) is read with Spark's state data source, which
# opens the store at the newest snapshot Spark uploaded and replays each changelog after
# it: 0.12 s a changelog at 100,000 keys on two cores. Spark's defaults (a snapshot every
# 10 versions, uploaded by a maintenance task once a minute) leave up to 40 changelogs
# at 2 s micro-batches: a base micro-batch took 3.1, 4.0, then 5.4 s as a run went on,
# against 2.9, 1.9, 1.7 s with these (docs/benchmarks-history.md), the other micro-batches
# alike.
# Neither is kept in the checkpoint: they apply to a restarted query too.
SNAPSHOT_CADENCE = {
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "2s",
}
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def session_conf(config: AppConfig) -> dict[str, str]:
    """SQL settings of the session: ours, then the user's --spark-conf (which win)."""
    conf = {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        CHANGELOG: "true",
        **SNAPSHOT_CADENCE,
        # Python workers get Arrow batches of lines; keep a partition's batches small.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    }
    conf.update(dict(config.spark_conf))
    return conf


def build_session(config: AppConfig) -> SparkSession:
    """Get or create the SparkSession, on a SparkContext made with today's settings
    (lifecycle/spark_context.py), with the state partitions sized to the cores."""
    # The Python workers start PYSPARK_PYTHON (default: the system python3, which lacks
    # pyarrow and this app): the executors must run this environment's Python.
    # PySpark reads it when the SparkContext is created, also under spark-submit.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # The stage progress bar would mix with the log lines and the console sink.
    forced = {"spark.ui.showConsoleProgress": ("false", "progress bars garble the console sink")}
    settings = session_conf(config)
    spark_context(config, settings, forced)
    builder = SparkSession.builder.appName(config.app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if SHUFFLE_PARTITIONS not in dict(config.spark_conf):
        # 200 by default: 200 state stores per micro-batch is slow on a few cores.
        spark.conf.set(SHUFFLE_PARTITIONS, str(spark.sparkContext.defaultParallelism))
    return spark
