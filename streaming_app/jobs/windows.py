"""Counts (or sums) over a sliding window, next to the running totals.

`reduceByKeyAndWindow` with an inverse function: each slide adds the batches entering the
window and subtracts those leaving it, instead of re-reducing the whole window. That form
keeps its previous window as state, so Spark must checkpoint it (every checkpoint
interval, a multiple of the slide). Keys whose value fell to zero are dropped, so the
state holds only what is in the window.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.settings.schema import spark_seconds
from streaming_app.sinks.attach import print_top, write_output_dir

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.streaming import DStream

    from streaming_app.settings.schema import AppConfig

WINDOW = "window"  # kind of the files sink's window directories: window-<batch_ms>/


def nonzero(pair: tuple[str, Any]) -> bool:
    """Keep a key only while it has something in the window."""
    return bool(pair[1] != 0)


def windowed(counts: DStream[tuple[str, Any]], config: AppConfig) -> DStream[tuple[str, Any]]:
    """The per-batch counts over the last `window` seconds, every `slide` seconds.

    A count is zero only when the key is in no batch of the window, so `nonzero` drops
    exactly the absent keys. A sum can be zero with rows (a refund): the keyed-sum job
    counts the batches that have the key next to the sum and drops a key at zero batches.
    """
    from streaming_app.jobs import counting as jobs

    assert config.window_ms is not None
    # PySpark's stubs say int seconds; it takes float seconds (truncated to milliseconds).
    window: Any = spark_seconds(config.window_ms)
    slide: Any = spark_seconds(config.slide_ms)
    if config.job == "keyed-sum":
        sums = counts.map(jobs.with_presence).reduceByKeyAndWindow(
            jobs.add_present, jobs.subtract_present, window, slide,
            filterFunc=jobs.present,
        )  # fmt: skip
        sums.checkpoint(spark_seconds(config.checkpoint_ms))  # type: ignore[arg-type]
        return sums.map(jobs.sum_only)
    add, subtract = jobs.reduce_functions(config)
    stream = counts.reduceByKeyAndWindow(
        add,
        subtract,
        window,
        slide,
        filterFunc=nonzero,
    )
    stream.checkpoint(spark_seconds(config.checkpoint_ms))  # type: ignore[arg-type]
    return stream


def write_window_console(batch_time: datetime, rdd: RDD[tuple[str, Any]], top_n: int) -> None:
    """Console sink: the top keys of the window that ends at this batch."""
    print_top(batch_time, rdd, top_n, label="Window")


def write_window_files(
    batch_time: datetime, rdd: RDD[tuple[str, Any]], output_dir: str, keep: int
) -> None:
    """Files sink: the whole window as `window-<batch_ms>/`, in the totals' layout.

    Written by the driver (one collect, one file) rather than by a Hadoop output job, which
    costs a second or more on two cores, every slide.
    """
    write_output_dir(batch_time, rdd, output_dir, keep, WINDOW, collect=True)


def attach_window_sinks(stream: DStream[tuple[str, Any]], config: AppConfig) -> None:
    """Write the window with every configured sink, once per slide."""
    # Plain values only: the lambdas are pickled into the checkpoint.
    top_n, output_dir, keep = config.top_n, config.output_dir, config.output_keep
    if "files" in config.sinks:
        assert output_dir is not None
        stream.foreachRDD(lambda t, rdd: write_window_files(t, rdd, output_dir, keep))
    if "console" in config.sinks:
        stream.foreachRDD(lambda t, rdd: write_window_console(t, rdd, top_n))
    if "postgres" in config.sinks:
        from streaming_app.sinks.postgres.stream import WindowTarget, write_window_postgres

        target = WindowTarget(config.postgres_table, config.job == "keyed-sum")
        stream.foreachRDD(lambda t, rdd: write_window_postgres(t, rdd, target))
