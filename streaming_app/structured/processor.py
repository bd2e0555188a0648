"""The running totals as transformWithState keeps them: one value state per key (RocksDB).

`RunningTotals` runs on the executors: for each key with pairs in a micro-batch, Spark
calls `handleInputRows` with the key's pairs; it adds them to the key's total with the
DStream jobs' own update functions (`update_count`, `update_sum`: exact) and emits the new
total, so each micro-batch's output is the totals it changed ("Update" mode). Totals are
kept and emitted as text (format_value), so exact sums never pass through a float.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StringType, StructField, StructType

from streaming_app.jobs.keyed import update_sum
from streaming_app.jobs.text import update_count
from streaming_app.sinks.files_layout import format_value

TOTALS_SCHEMA = "key string, total string"
STATE_NAME = "total"
_STATE_SCHEMA = StructType([StructField(STATE_NAME, StringType(), False)])


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
    """transformWithState processor: each key's running total, updated by its new pairs."""

    def __init__(self, job: str) -> None:
        self.job = job

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the key's value state (Spark calls it once per task, and on the driver)."""
        self.total = handle.getValueState(STATE_NAME, _STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803 (Spark's names)
        """Add the key's pairs of this micro-batch to its total; emit the new total."""
        word = key[0] if isinstance(key, tuple) else key
        before = self.total.get()[0] if self.total.exists() else None  # type: ignore[index]
        after = updated_total(self.job, (row.value for row in rows), before)
        if after is None:
            return
        self.total.update((after,))
        yield Row(key=word, total=after)

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:  # noqa: N802, N803 (Spark's names)
        """Seed the key's total from a restored snapshot (micro-batch 0 of a new query only)."""
        self.total.update((initialState.total,))

    def close(self) -> None:
        """Nothing to release."""
