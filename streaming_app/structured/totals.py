"""The running totals: Spark's own streaming aggregation, and reading them back from its state.

Driver side; Spark runs it all on the executors. `running_totals` sums the pairs per key
(`groupBy(key).agg(sum(value))`, "update" output mode: each micro-batch outputs the totals
it changed). The JVM keeps the totals in the state store (RocksDB by default, session.py),
so a micro-batch costs what its input costs and Python only reads, tokenizes and pre-aggregates.
`state_totals` reads a committed micro-batch's totals with Spark's state data source
(`statestore`, one task per state partition); `every_total` lays a micro-batch's changes
over the totals of the micro-batch before: every total after it, never collected, and
`EveryTotal` reads it once a micro-batch for the base, the snapshot and the postgres sink.
Nothing here brings a key to the driver but `top_pairs` (the console's top N, each
partition's top N ranked where it is).
`snapshot_lines` and `total_lines` are Spark's own expressions for the snapshot's JSON
lines and the files sink's lines, what `format_line` and `format_total` write of the
exact pairs: a base or a snapshot of every total never passes through Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming_app.structured.state_layout import KEY, SUM_FIELD, TOTAL, VALUE, exact

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

LINE = "value"  # the one column of Spark's text data source


def running_totals(pairs: DataFrame) -> DataFrame:
    """Each key's running total of its pairs' values: (key, total)."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    return pairs.groupBy(KEY).agg(F.sum(VALUE).alias(TOTAL))


def state_totals(spark: SparkSession, checkpoint: str, batch_id: int) -> DataFrame:
    """(key, total) of every key after committed micro-batch `batch_id`, on the executors."""
    state = spark.read.format("statestore").option("batchId", batch_id).load(checkpoint)
    return state.select(state[KEY][KEY].alias(KEY), state[VALUE][SUM_FIELD].alias(TOTAL))


def every_total(
    spark: SparkSession,
    checkpoint: str,
    batch_id: int,
    changes: DataFrame,
) -> DataFrame:
    """Every total after micro-batch `batch_id`, whose changed totals are `changes`.

    Micro-batch 0 changed every total there is (a restored snapshot's come in as its
    input); a later one's are laid over the committed totals of the one before, all but
    those of the changed keys. `changes` must be checkpointed (changes.py): a plan that
    reads a micro-batch's own frame twice gets a new instance of it the second time,
    which misses its cache, and Spark runs the micro-batch's state operator again.
    """
    if batch_id == 0:
        return changes
    before = state_totals(spark, checkpoint, batch_id - 1)
    # Not broadcast: a broadcast join collects the changed keys on the driver first.
    kept = before.join(changes.select(KEY).hint("shuffle_hash"), KEY, "left_anti")
    return kept.unionByName(changes)


class EveryTotal:
    """Every total after one micro-batch, read at most once for whatever needs it then.

    A files base, a snapshot and the postgres sink after a gap each need every total;
    `frame` reads them (every_total, on the executors) into a cached frame the first time
    it is called, and `release` drops that cache at the micro-batch's end. `changes` gives
    the micro-batch's changed totals checkpointed on the executors (changes.py), so that a
    plan may read them twice without running the micro-batch again; asked for only when
    every total is.
    """

    def __init__(
        self,
        spark: SparkSession,
        checkpoint: str,
        batch_id: int,
        changes: Callable[[], DataFrame],
    ) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.batch_id = batch_id
        self.changes = changes
        self._frame: DataFrame | None = None

    def frame(self) -> DataFrame:
        """Every total as a frame of (key, total), cached until `release`."""
        if self._frame is None:
            changes = self.changes()
            frame = every_total(self.spark, self.checkpoint, self.batch_id, changes)
            # One part per state partition, as the state has (the union doubles them).
            parts = max(changes.rdd.getNumPartitions(), 1)
            self._frame = frame.coalesce(parts).persist()
        return self._frame

    def text_pairs(self) -> DataFrame:
        """Every total as `text_pairs` (for the postgres sink's staging, on the executors)."""
        return text_pairs(self.frame())

    def release(self) -> None:
        """Drop the cached frame, if it was read."""
        if self._frame is not None:
            self._frame.unpersist()
            self._frame = None


def top_pairs(frame: DataFrame, n: int) -> list[tuple[str, Any]]:
    """The `n` first (key, total) of a frame by `rank` (highest total, then key), as exact
    pairs: Spark's `TakeOrderedAndProject` ranks each partition's top n on the executors,
    so n rows a partition at most reach the driver."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    if n <= 0:
        return []
    ranked = frame.orderBy(F.col(TOTAL).desc(), F.col(KEY).asc()).limit(n)
    return [exact_pair(row) for row in ranked.collect()]


def exact_pair(row: Any) -> tuple[str, Any]:
    """A (key, total) row as the DStream engine's pair: an int or a normalized Decimal."""
    return row[0], exact(row[1])


def text_pairs(frame: DataFrame) -> DataFrame:
    """A frame of (key, total) as (partition, key, total as `exact` formats it, as text):
    what the postgres sink's staging tasks COPY (staging.py `stage_batches`), with no
    Python object per row (Arrow's CSV, where `DataFrame.rdd` would unpickle a Row a
    total); the partition is the task's, computed in the same stage."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    part = F.spark_partition_id().alias("part")
    return frame.select(part, F.col(KEY), total_text(F.col(TOTAL)).alias(TOTAL))


def total_text(total: Column) -> Column:
    """A total as `exact` formats it: a bigint as is, a decimal without trailing zeros
    (Spark writes a decimal's every scale digit, never an exponent)."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    text = total.cast("string")
    trimmed = F.regexp_replace(F.regexp_replace(text, "0+$", ""), "\\.$", "")
    return F.when(text.contains("."), trimmed).otherwise(text)


def snapshot_lines(frame: DataFrame) -> DataFrame:
    """(key, total) as snapshot lines, `["key", 12]` or `["key", "1.5"]` (format_line).

    Spark's JSON writer escapes a string as Python's json does with ensure_ascii=False,
    but for the hex digits of a control character's escape: upper case (`\\u001F`, where
    Python writes `\\u001f`); the same JSON, the same key read back.
    """
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    key = F.regexp_replace(F.to_json(F.array(F.col(KEY))), "]$", "")  # `["key"`
    total = F.col(TOTAL)
    if frame.schema[TOTAL].dataType.typeName() == "decimal":
        value = F.concat(F.lit(', "'), total_text(total), F.lit('"]'))
    else:
        value = F.concat(F.lit(", "), total_text(total), F.lit("]"))
    return frame.select(F.concat(key, value).alias(LINE))


def total_lines(frame: DataFrame) -> DataFrame:
    """(key, total) as the files sink's lines, `key<TAB>total` (format_total)."""
    return frame.select(total_line().alias(LINE))


def total_line() -> Column:
    """A (key, total) row's line in the files sink, `key<TAB>total` (format_total)."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    return F.concat(F.col(KEY), F.lit("\t"), total_text(F.col(TOTAL)))


def count_and_sum(frame: DataFrame) -> tuple[int, Any]:
    """How many totals a frame of (key, total) has, and their exact sum.

    Spark's sum of a decimal(38, s) overflows where Python's does not: then (a sum of more
    than 38 digits) the totals are summed as exact pairs."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    row = frame.agg(F.count(F.lit(1)), F.try_sum(TOTAL)).first()
    assert row is not None
    words, total = int(row[0]), row[1]
    if not words:
        return 0, 0
    if total is None:  # overflowed
        total = frame.rdd.map(exact_pair).values().sum()
    return words, exact(total)
