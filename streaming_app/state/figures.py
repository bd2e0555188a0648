"""The state's figures after each batch, for the metrics: its keys, the words it added.

The word count reports both; the keyed sums add values, not words, and report keys only.

Driver side, DStream engine. The sinks that read the state (files, console, postgres
with buckets) call `note_state` with the batch's state RDD after their write, from their
own functions: the graph a checkpoint pickles names the sinks' functions, not this
module (its references stay those of 0.4.0's checkpoints), and a graph recovered from a
checkpoint of 0.4.0 reports its figures too. It reads the batch's digest
(state/view.py), which the sink has usually collected already (the files and postgres
sinks' changed totals, the console's top), so it costs no job then; otherwise (a files
base) one small job of the buckets' counts. It runs only while a metrics file or a
Prometheus endpoint asks (`want_state_figures`), and only with state buckets: one record
per key (state_buckets = 0) would need a scan of the whole state every batch. The
batch's listener takes the figures by batch time (`state_figures`) into its metrics
record. A batch whose state RDD Spark checkpointed stamps the endpoint's last
`checkpoint` success (how long the write took, Spark does not tell Python).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.common.per_batch import remember
from streaming_app.common.prometheus import succeeded
from streaming_app.jobs.text import add_counts

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.state.view import StateView

# batch time -> (keys, words added or None), until the batch's listener asks.
_FIGURES: dict[int, tuple[int, int | None]] = {}
_WANTED = [False]


def want_state_figures(wanted: bool) -> None:
    """Whether this driver process notes the state's figures (a metrics file or endpoint)."""
    _WANTED[0] = wanted


def note_state(batch_time: datetime, rdd: RDD[Any], view: StateView) -> None:
    """Keep the batch's state keys (and the word count's words it added) for its metrics
    record; a sink calls it with the state RDD it wrote. The batch's second sink finds
    its figures noted and does nothing."""
    batch_ms = epoch_ms(batch_time)
    if not _WANTED[0] or batch_ms in _FIGURES:
        return
    if rdd.isCheckpointed():  # Spark wrote the state's checkpoint in this batch
        succeeded("checkpoint", None)
    if not view.bucketed:
        return
    digest = view.digest(rdd)
    added = (digest.added or 0) if view.add is add_counts else None  # keyed sums: no words
    remember(_FIGURES, batch_ms, (digest.keys, added))


def state_figures(batch_ms: int) -> tuple[int | None, int | None]:
    """The state's keys and the words a batch added ((None, None) if not noted); forgotten
    once asked."""
    return _FIGURES.pop(batch_ms, (None, None))
