"""The structured engine's sources: a streaming DataFrame of lines (one `value` column).

Driver side: Spark's own file and socket sources read the lines on the executors.
- files: `readStream.text` on the input directory. Spark records the files each
  micro-batch read in the query's `sources/0/` log, so a restart reads each file exactly
  once. Unlike the DStream engine, the files present when a new query starts are read too
  (in its first micro-batch): Spark's file source cannot skip them.
- socket: Spark's socket source, for demos; like the DStream one it cannot replay.
- kafka: our Python streaming data source on kafka-python (kafka_source.py). Spark logs
  each micro-batch's end offsets in the query's `offsets/` log, so a restart reads each
  record exactly once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streaming_app.settings.schema import AppConfig
from streaming_app.sources.kafka.settings import source_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# Spark's file source option: files older than this before the newest one seen are skipped.
MAX_FILE_AGE = "36500d"


def lines_of(spark: SparkSession, config: AppConfig) -> DataFrame:
    """The configured source's lines: files moved into input_dir, or a TCP socket."""
    if config.source == "kafka":
        return _kafka_lines(spark, config)
    if config.source == "files":
        assert config.input_dir is not None
        log.info("source: files in %s (exactly-once across driver crashes)", config.input_dir)
        # Spark's file source skips, without a word, a file whose modification time is
        # more than maxFileAge (7 days by default) before the newest file it has seen: a
        # file moved in (`mv` keeps its time) from an old export would never be counted.
        # The app's promise is every file moved in, so the age is a century; Spark then
        # remembers every file name it has read, as its source log already does.
        return spark.readStream.option("maxFileAge", MAX_FILE_AGE).text(config.input_dir)
    log.info(
        "source: socket %s:%d (not replayable: a crash loses what is in flight)",
        config.host,
        config.port,
    )
    return (
        spark.readStream.format("socket")
        .option("host", config.host)
        .option("port", config.port)
        .load()
    )


def _kafka_lines(spark: SparkSession, config: AppConfig) -> DataFrame:
    from streaming_app.structured.kafka_options import KafkaReadSettings
    from streaming_app.structured.kafka_source import NAME, KafkaDataSource

    settings = KafkaReadSettings.from_config(config)
    log.info("%s", source_line(settings))
    spark.dataSource.register(KafkaDataSource)
    return spark.readStream.format(NAME).options(**settings.to_options()).load()
