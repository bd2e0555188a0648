"""What a sink tells the metrics of the state it wrote: its RDD checkpoint and its figures.

Driver side, DStream engine. The sinks that read the state (files, console, postgres
with buckets) call `observe_state` with the batch's state RDD after their write, from
their own functions: the graph a checkpoint pickles names the sinks' functions, not this
module (its references stay those of 0.4.0's checkpoints), and a graph recovered from a
checkpoint of 0.4.0 reports too. A batch whose state RDD Spark checkpointed stamps the
endpoint's last `checkpoint` success (how long the write took, Spark does not tell
Python); the state's figures go to figures.py. Nothing is looked at unless a metrics
file or endpoint asks (`FIGURES.wanted`), and once a batch (its first sink).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.common.prometheus import succeeded
from streaming_app.state.figures import FIGURES

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.state.view import StateView


def observe_state(batch_time: datetime, rdd: RDD[Any], view: StateView) -> None:
    """A sink wrote the batch's state `rdd`: stamp its checkpoint, note its figures."""
    batch_ms = epoch_ms(batch_time)
    if not FIGURES.wanted or FIGURES.noted(batch_ms):
        return
    if rdd.isCheckpointed():  # Spark wrote the state's checkpoint in this batch
        succeeded("checkpoint", None)
    FIGURES.note(batch_ms, rdd, view)
