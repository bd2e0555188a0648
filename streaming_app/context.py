"""The one factory, `create_context`: the whole DStream graph handed to getOrCreate."""

from __future__ import annotations

import logging
from functools import partial
from typing import cast

from pyspark import SparkConf, SparkContext
from pyspark.streaming import DStream, StreamingContext

from streaming_app.config import AppConfig, spark_seconds
from streaming_app.sinks import attach_sinks
from streaming_app.sources import build_source
from streaming_app.text import add_counts, count_words, update_count

log = logging.getLogger(__name__)

# Spark settings the app relies on; conf/spark-defaults.conf or --spark-conf may override.
ESSENTIAL_SPARK_CONF = {
    # SIGTERM to the JVM also finishes the batches in flight.
    "spark.streaming.stopGracefullyOnShutdown": "true",
    # The batched block-metadata log is closed before a graceful stop has allocated the
    # last received blocks, so the stop would wait out its whole timeout.
    "spark.streaming.driver.writeAheadLog.allowBatching": "false",
}


def create_context(config: AppConfig) -> StreamingContext:
    """Build a new StreamingContext with source, word counts, running totals and sinks.

    Only called when there is no checkpoint: on recovery Spark rebuilds this graph
    from the checkpoint, with the settings captured here at creation time.
    """
    log.info(
        "Creating new context: source=%s batch_interval=%gs checkpoint_interval=%gs "
        "checkpoint_dir=%s",
        config.source,
        config.batch_interval,
        config.checkpoint_ms / 1000,
        config.checkpoint_dir,
    )
    conf = SparkConf().setAppName(config.app_name)
    for key, value in ESSENTIAL_SPARK_CONF.items():
        conf.setIfMissing(key, value)
    # Set, not setIfMissing: the launcher turns progress bars on for pyspark-shell, and
    # they would garble the console sink's lines. --spark-conf can still turn them on.
    conf.set("spark.ui.showConsoleProgress", "false")
    if config.source == "socket":
        # Received lines go to a write-ahead log in the checkpoint directory, so that
        # batches recomputed after a restart still have their input (otherwise the
        # totals would fall back to the last state checkpoint).
        conf.set("spark.streaming.receiver.writeAheadLog.enable", "true")
    for key, value in config.spark_conf:
        conf.set(key, value)
    sc = SparkContext.getOrCreate(conf)
    ssc = StreamingContext(sc, spark_seconds(config.batch_ms))  # type: ignore[arg-type]
    ssc.checkpoint(config.checkpoint_dir)

    lines = build_source(ssc, config)
    counts = lines.mapPartitions(
        partial(count_words, pattern=config.token_pattern, lowercase=config.lowercase)
    ).reduceByKey(add_counts)
    # update_count only returns None for keys that never had a count, so no total is None.
    totals = cast("DStream[tuple[str, int]]", counts.updateStateByKey(update_count))
    totals.checkpoint(spark_seconds(config.checkpoint_ms))  # type: ignore[arg-type]
    attach_sinks(totals, config.sinks, config.top_n, config.output_dir, config.output_keep)
    if config.source == "kafka":
        from streaming_app.kafka_source import attach_commit

        attach_commit(totals, config)  # last: a batch is committed once every sink has it
    return ssc
