"""Sliding windows on the structured engine: a second query beside the totals' one.

Driver side; Spark runs the aggregation on the executors. Spark cannot keep two
aggregations of one input in one query, so `--window`/`--slide` start a second query
(`windows`), with its checkpoint in `<checkpoint_dir>/windows/` and its own reading of the
source (each query is exactly once on its own). Its pairs carry the micro-batch's time,
`current_timestamp()` (the offsets log's timestamp, the same on a replay) rounded down to
the batch interval, less one millisecond; `groupBy(window(time, window, slide), key)`
sums them, and the window ending at T holds the micro-batches timed in (T - window, T],
as a DStream window ending at batch time T holds its batches. With a zero-delay watermark
on that time, each window is output once ("append" mode) when it closed: at the first
micro-batch with input after its end. The window sinks (window_sinks.py) write it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import join
from streaming_app.settings.schema import AppConfig
from streaming_app.structured.pairs import pairs_of
from streaming_app.structured.query import start_stream
from streaming_app.structured.source import lines_of
from streaming_app.structured.state_layout import KEY, TOTAL, VALUE
from streaming_app.structured.window_sinks import WindowSinks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

WINDOW_QUERY = "windows"  # the query's name, and its checkpoint under checkpoint_dir
TIME = "batch_time"


def window_checkpoint(checkpoint_dir: str) -> str:
    """The window query's checkpoint location, inside the totals' checkpoint directory."""
    return join(checkpoint_dir, WINDOW_QUERY)


def window_totals(pairs: DataFrame, config: AppConfig) -> DataFrame:
    """(window, key, total) of each window of `window` seconds, every `slide` seconds."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    assert config.window_ms is not None
    batch = F.lit(config.batch_ms)
    start = F.floor(F.unix_millis(F.current_timestamp()) / batch) * batch
    timed = pairs.withColumn(TIME, F.timestamp_millis(start - F.lit(1)))
    return (
        timed.withWatermark(TIME, "0 seconds")
        .groupBy(
            F.window(TIME, f"{config.window_ms} milliseconds", f"{config.slide_ms} milliseconds"),
            KEY,
        )
        .agg(F.sum(VALUE).alias(TOTAL))
    )


def start_window_query(spark: SparkSession, config: AppConfig) -> Any:
    """Start (or resume) the window query; returns it running."""
    # Its own reading of the source: no group commits (the totals' query makes them),
    # and its bad rows are the totals' query's to warn of.
    reading = replace(config, group_id=None)
    pairs = pairs_of(lines_of(spark, reading), reading)
    query = start_stream(
        window_totals(pairs, config),
        "append",
        WindowSinks(config),
        window_checkpoint(config.checkpoint_dir),
        config.batch_ms,
        WINDOW_QUERY,
    )
    log.info(
        "Started the window query id=%s: window=%g s slide=%g s (checkpoint %s)",
        query.id,
        (config.window_ms or 0) / 1000,
        config.slide_ms / 1000,
        window_checkpoint(config.checkpoint_dir),
    )
    return query
