"""Lines per batch of the files source, for the metrics, counted by the job that reads them.

Spark reports no record count for a textFileStream batch (only receivers and streams that
count themselves report input info), and a count of its own would be one more job per
batch. Instead the batch's RDD counts its lines as the batch's own jobs read them.
Driver side: `counted` wraps the batch's RDD, `batch_lines` takes a batch's total when it
completes. Executor side: `_count` passes the lines on and then adds its partition's count
to one accumulator keyed by batch time and partition. A partition read twice (by two
output operations, or a retried task) gives the same count again: the count of each
partition is kept, not added up.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.accumulators import AccumulatorParam

from streaming_app.common.per_batch import take_batch

if TYPE_CHECKING:
    from pyspark import RDD

# {batch_ms: {partition index: lines}}
LineCounts = dict[int, dict[int, int]]


class LineCountsParam(AccumulatorParam[LineCounts]):
    """Merges partition counts per batch; a partition counted again keeps one count."""

    def zero(self, value: LineCounts) -> LineCounts:
        return {}

    def addInPlace(self, first: LineCounts, second: LineCounts) -> LineCounts:  # noqa: N802
        for batch_ms, partitions in second.items():
            into = first.setdefault(batch_ms, {})
            for index, lines in partitions.items():
                into[index] = max(into.get(index, 0), lines)
        return first


# The driver process's accumulator, made on first use (never part of the checkpoint: PySpark
# never forgets an accumulator, so one per batch would leak).
_COUNTS: Any = None


def counted(rdd: RDD[str], batch_ms: int) -> RDD[str]:
    """The batch's lines, counted per partition as its jobs read them (driver side)."""
    global _COUNTS
    if _COUNTS is None:
        _COUNTS = rdd.context.accumulator({}, LineCountsParam())
    count = partial(_count, batch_ms, _COUNTS)
    return rdd.mapPartitionsWithIndex(count, preservesPartitioning=True)


def _count(batch_ms: int, counts: Any, index: int, lines: Iterator[str]) -> Iterator[str]:
    """Executor side: pass a partition's lines on, then add how many there were."""
    seen = 0
    for line in lines:
        seen += 1
        yield line
    counts.add({batch_ms: {index: seen}})


def batch_lines(batch_ms: int) -> int:
    """The lines a completed batch read (driver side); its count and older ones are dropped."""
    if _COUNTS is None:
        return 0
    by_batch: LineCounts = _COUNTS.value
    # Batches recomputed for lineage are never reported.
    return sum(take_batch(by_batch, batch_ms, {}).values())
