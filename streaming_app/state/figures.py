"""The state's figures after each batch, for the metrics: its keys, the words it added.

The word count reports both; the keyed sums add values, not words, and report keys only.

Driver side, DStream engine. `FIGURES` holds them for the driver process: the sinks that
read the state note the batch's state RDD after their write (observe.py), and it reads
the batch's digest (state/view.py), which the sink has usually brought already (the
files sink's writing job, the console's top), so it costs no job then; otherwise (the
postgres sink alone) one small job of the buckets' counts. It notes only while a
metrics file or a Prometheus endpoint asks (`StateFigures.wanted`, set by dstream/run.py),
and only with state buckets: one record per key (state_buckets = 0) would need a scan of
the whole state every batch. The batch's listener takes the figures by batch time
(`StateFigures.take`) into its metrics record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streaming_app.common.per_batch import remember
from streaming_app.jobs.text import add_counts

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.state.view import StateView


class StateFigures:
    """Each batch's state figures, by batch time, until the batch's listener takes them."""

    def __init__(self) -> None:
        self.wanted = False  # a metrics file or endpoint reads them
        self._noted: dict[int, tuple[int, int | None]] = {}  # keys, words added (or None)

    def noted(self, batch_ms: int) -> bool:
        """Whether the batch's figures are noted (by an earlier sink of the batch)."""
        return batch_ms in self._noted

    def note(self, batch_ms: int, rdd: RDD[Any], view: StateView) -> None:
        """Keep the batch's state keys (and the word count's words it added), once a batch,
        while wanted and the state has buckets."""
        if not self.wanted or not view.bucketed or batch_ms in self._noted:
            return
        digest = view.digest(rdd)
        added = (digest.added or 0) if view.add is add_counts else None  # keyed sums: no words
        remember(self._noted, batch_ms, (digest.keys, added))

    def take(self, batch_ms: int) -> tuple[int | None, int | None]:
        """The state's keys and the words a batch added ((None, None) if not noted);
        forgotten once taken."""
        return self._noted.pop(batch_ms, (None, None))


FIGURES = StateFigures()  # the driver process's
