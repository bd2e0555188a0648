"""The running totals: Spark's own streaming aggregation, and reading them back from its state.

Driver side; Spark runs it all on the executors. `running_totals` sums the pairs per key
(`groupBy(key).agg(sum(value))`, "update" output mode: each micro-batch outputs the totals
it changed). The JVM keeps the totals in the state store (in its memory by default), so a
micro-batch costs what its input costs and Python only reads, tokenizes and pre-aggregates.
`state_totals` reads a committed micro-batch's totals with Spark's state data source
(`statestore`, one task per state partition); `every_total` lays a micro-batch's changes
over the totals of the micro-batch before: every total after it, never collected, and
`EveryTotal` reads it once a micro-batch for the base, the snapshot and the postgres sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streaming_app.sinks.files_layout import format_total
from streaming_app.structured.state_layout import KEY, SUM_FIELD, TOTAL, VALUE, exact

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession


def running_totals(pairs: DataFrame) -> DataFrame:
    """Each key's running total of its pairs' values: (key, total)."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    return pairs.groupBy(KEY).agg(F.sum(VALUE).alias(TOTAL))


def state_totals(spark: SparkSession, checkpoint: str, batch_id: int) -> DataFrame:
    """(key, total) of every key after committed micro-batch `batch_id`, on the executors."""
    state = spark.read.format("statestore").option("batchId", batch_id).load(checkpoint)
    return state.select(state[KEY][KEY].alias(KEY), state[VALUE][SUM_FIELD].alias(TOTAL))


def every_total(
    spark: SparkSession, checkpoint: str, batch_id: int, changes: DataFrame
) -> DataFrame:
    """Every total after micro-batch `batch_id`, whose changed totals are `changes`.

    Micro-batch 0 changed every total there is (a restored snapshot's come in as its
    input); a later one's are laid over the committed totals of the one before.
    """
    if batch_id == 0:
        return changes
    before = state_totals(spark, checkpoint, batch_id - 1)
    kept = before.join(changes.select(KEY), KEY, "left_anti")
    return kept.unionByName(changes)


class EveryTotal:
    """Every total after one micro-batch, read at most once for whatever needs it then.

    A files base, a snapshot and the postgres sink after a gap each need every total;
    `pairs` reads them (every_total, on the executors) into cached exact pairs the first
    time it is called, and `release` drops that cache at the micro-batch's end.
    """

    def __init__(
        self, spark: SparkSession, checkpoint: str, batch_id: int, changes: DataFrame
    ) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.batch_id = batch_id
        self.changes = changes
        self._pairs: RDD[tuple[str, Any]] | None = None

    def frame(self) -> DataFrame:
        """Every total as a frame of (key, total), not cached."""
        return every_total(self.spark, self.checkpoint, self.batch_id, self.changes)

    def pairs(self) -> RDD[tuple[str, Any]]:
        """Every total as exact (key, total) pairs, cached until `release`."""
        if self._pairs is None:
            frame = self.frame()
            # One part per state partition, as the state has (the union doubles them).
            parts = max(self.changes.rdd.getNumPartitions(), 1)
            self._pairs = frame.rdd.map(exact_pair).coalesce(parts).persist()
        return self._pairs

    def release(self) -> None:
        """Drop the cached pairs, if they were read."""
        if self._pairs is not None:
            self._pairs.unpersist()
            self._pairs = None


def collect_pairs(frame: DataFrame) -> list[tuple[str, Any]]:
    """A small frame of (key, total), such as a micro-batch's changes, as exact pairs on
    the driver: through Arrow, about a quarter of what `collect`'s rows cost."""
    table = frame.toArrow()
    keys = table.column(0).to_pylist()
    totals = table.column(1).to_pylist()
    return [(key, exact(total)) for key, total in zip(keys, totals, strict=True)]


def exact_pair(row: Any) -> tuple[str, Any]:
    """A (key, total) row as the DStream engine's pair: an int or a normalized Decimal."""
    return row[0], exact(row[1])


def total_line(row: Any) -> str:
    """A (key, total) row as a line of the files sink (`word<TAB>total`)."""
    return format_total(exact_pair(row))
