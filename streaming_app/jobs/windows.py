"""Counts (or sums) over a sliding window, next to the running totals (DStream wiring).

`reduceByKeyAndWindow` with an inverse function: each slide adds the batches entering the
window and subtracts those leaving it, instead of re-reducing the whole window. That form
keeps its previous window as state, so Spark must checkpoint it (every checkpoint
interval, a multiple of the slide). Keys whose value fell to zero are dropped, so the
state holds only what is in the window. `windowed` runs on the driver when the graph is
built; the reduce and filter functions it names run on the executors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import spark_seconds

if TYPE_CHECKING:
    from pyspark.streaming import DStream

    from streaming_app.settings.schema import AppConfig


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
