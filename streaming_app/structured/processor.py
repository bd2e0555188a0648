"""The running totals as transformWithState keeps them: word -> total maps, by bucket (RocksDB).

The state is grouped by bucket, not by word: each pair's key is hashed into one of
`BUCKETS` buckets (`bucketed`, a Spark expression, driver side), and each bucket keeps a map
state of its words' totals. Spark calls the processor once per bucket with pairs in a
micro-batch, not once per word, and the processor reads and writes the bucket's words in a
few exchanges with the state server (state_calls.py): per word it costs two map-state
calls and no round trip of its own, where a value state per word cost four round trips
and an Arrow batch per word. The state a micro-batch touches is still only its words'.

`RunningTotals` runs on the executors: it adds each word's pairs to its total with the
DStream jobs' own update functions (`update_count`, `update_sum`: exact) and emits the new
totals, so each micro-batch's output is the totals it changed ("Update" mode). Totals are
kept and emitted as text (format_value), so exact sums never pass through a float.
The layout is fixed in a checkpoint (state_layout.py; guard.py records it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StringType, StructField, StructType

from streaming_app.jobs.keyed import update_sum
from streaming_app.jobs.text import update_count
from streaming_app.sinks.files_layout import format_value
from streaming_app.structured import problems
from streaming_app.structured.state_calls import get_values, update_values
from streaming_app.structured.state_layout import BUCKET, BUCKETS, STATE_NAME

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TOTALS_SCHEMA = "key string, total string"
_STATE_SCHEMA = StructType([StructField(STATE_NAME, StringType(), False)])
_WORD_SCHEMA = StructType([StructField("word", StringType(), False)])


def bucketed(frame: DataFrame) -> DataFrame:
    """`frame` with its `key` column's bucket (Spark's murmur3 hash, so the same everywhere);
    pairs whose value is a problem count go to problems.PROBLEMS_BUCKET."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    bucket = F.pmod(F.hash("key"), F.lit(BUCKETS))
    if "value" in frame.columns:  # pairs (a seed has key and total)
        bucket = F.when(
            F.col("value").startswith(problems.PROBLEM_TAG), F.lit(problems.PROBLEMS_BUCKET)
        ).otherwise(bucket)
    return frame.withColumn(BUCKET, bucket)


def parse_number(job: str, text: str) -> int | Decimal:
    """A value or total as the job keeps it: a count (int) or an exact sum (Decimal)."""
    return Decimal(text) if job == "keyed-sum" else int(text)


def updated_total(job: str, values: Iterable[str], total: str | None) -> str | None:
    """The key's total after this micro-batch's values, as text (None: still no total)."""
    new = [parse_number(job, value) for value in values]
    before = None if total is None else parse_number(job, total)
    after: Any = (
        update_sum(new, before) if job == "keyed-sum" else update_count(new, before)  # type: ignore[arg-type]
    )
    return None if after is None else format_value(after)


class RunningTotals(StatefulProcessor):
    """transformWithState processor: the running totals of a bucket's words, by their pairs."""

    def __init__(self, job: str) -> None:
        self.job = job

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the bucket's map state (Spark calls it once per task, and on the driver)."""
        self.totals = handle.getMapState(STATE_NAME, _WORD_SCHEMA, _STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803 (Spark's names)
        """Add the bucket's pairs of this micro-batch to its words' totals; emit the new ones.

        The problem counts' bucket is passed on, summed per kind, and stores nothing."""
        if key[0] == problems.PROBLEMS_BUCKET:
            for kind, count in problems.summed((row.key, row.value) for row in rows):
                yield Row(key=kind, total=count)
            return
        values: dict[str, list[str]] = {}
        for row in rows:  # a word has a pair per input partition that had it
            values.setdefault(row.key, []).append(row.value)
        words = list(values)
        stored = get_values(self.totals, [(word,) for word in words])
        changed = []
        for word, before in zip(words, stored, strict=True):
            after = updated_total(self.job, values[word], None if before is None else before[0])
            if after is not None:
                changed.append((word, after))
        update_values(self.totals, [((word,), (after,)) for word, after in changed])
        for word, after in changed:
            yield Row(key=word, total=after)

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:  # noqa: N802, N803 (Spark's names)
        """Seed a word's total from a restored snapshot (micro-batch 0 of a new query only)."""
        self.totals.updateValue((initialState.key,), (initialState.total,))

    def close(self) -> None:
        """Nothing to release."""
