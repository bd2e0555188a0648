"""The batches that write periodically, told from the others by their batch times.

Two rules, as the app and Spark apply them in a run that starts afresh with a state
checkpoint every N batches (snapshots at the same interval, the default):

- aligned: a batch time that is a multiple of the interval writes the state snapshot
  (the snapshot writer's rule, so that a replayed batch rewrites the same one) and, once
  the files sink writes a full base only at checkpoint-aligned batch times, that base;
- Spark's state checkpoint: the batches numbered N, 2N, ... from the first of the run
  (bench/throughput/checkpoint.py's `writes_checkpoint`).

The two sets coincide only when the run's first batch happens to fall on the right time.
"""

from __future__ import annotations

from bench.harness.results import median
from streaming_app.common.metrics_record import BatchMetrics


def aligned(batch_ms: int, interval_ms: int, every: int) -> bool:
    """Whether the batch time is a multiple of the checkpoint interval (`every` batches)."""
    return batch_ms % (interval_ms * every) == 0


def kinds(batch: BatchMetrics, first_ms: int, every: int) -> tuple[bool, bool]:
    """(aligned, wrote Spark's checkpoint) of a batch of a run whose first batch is first_ms."""
    interval = batch.batch_interval_ms
    return (
        aligned(batch.batch_time_ms, interval, every),
        writes_checkpoint(batch.batch_time_ms, first_ms, interval, every),
    )


def periodic_figures(
    batches: list[BatchMetrics], first_ms: int, every: int, prefix: str
) -> dict[str, float | int | None]:
    """Processing seconds of `batches`: the median of all, of the plain ones (that write
    neither), of the aligned ones, of those that wrote Spark's checkpoint, the slowest, and
    how many there were. Keys start with `prefix`; None where a kind has no batch."""
    seconds: dict[str, list[float]] = {"all": [], "plain": [], "aligned": [], "checkpoint": []}
    for batch in batches:
        s = (batch.processing_ms or 0) / 1000
        is_aligned, is_checkpoint = kinds(batch, first_ms, every)
        seconds["all"].append(s)
        if is_aligned:
            seconds["aligned"].append(s)
        if is_checkpoint:
            seconds["checkpoint"].append(s)
        if not is_aligned and not is_checkpoint:
            seconds["plain"].append(s)

    def middle(values: list[float]) -> float | None:
        return round(median(values), 3) if values else None

    return {
        f"{prefix}median_s": middle(seconds["all"]),
        f"{prefix}plain_s": middle(seconds["plain"]),
        f"{prefix}aligned_s": middle(seconds["aligned"]),
        f"{prefix}checkpoint_s": middle(seconds["checkpoint"]),
        f"{prefix}max_s": round(max(seconds["all"]), 3) if seconds["all"] else None,
        f"{prefix}batches": len(seconds["all"]),
    }


def writes_checkpoint(batch_ms: int, first_batch_ms: int, interval_ms: int, every: int) -> bool:
    """Whether the batch at batch_ms checkpointed the state, in a run that started afresh.

    Spark's DStream marks its RDD for checkpointing when (time - zeroTime) is a multiple
    of the checkpoint interval, and a new context's zeroTime is its first batch time less
    one batch interval: the batches numbered every, 2 * every, ... counting the first as 1.
    (Checked against Spark's "Done checkpointing RDD" log lines: see docs/benchmarks.md.)
    """
    number = (batch_ms - first_batch_ms) // interval_ms + 1
    return number % every == 0
