"""Entries kept on the driver per batch until the batch's listener asks for them, bounded.

The sinks, sources and state note figures by batch (epoch ms, or a micro-batch's id) as
their jobs run; the batch's listener takes them once the batch completes. A backlog after
down time, or a run without a listener, must not grow them without end.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

# Entries kept for batches not asked for yet (a backlog after down time, or no listener).
MAX_REMEMBERED = 10_000


def remember(by_batch: dict[int, T], batch: int, value: T) -> None:
    """Keep a batch's entry until it is asked for; beyond MAX_REMEMBERED the oldest go."""
    by_batch[batch] = value
    while len(by_batch) > MAX_REMEMBERED:
        del by_batch[min(by_batch)]


def take_batch(by_batch: dict[int, T], batch_ms: int, default: T) -> T:
    """Pop batch `batch_ms`'s entry (`default` if none) and forget every older batch's.

    For per-batch figures kept on the driver until a batch completes: entries of older
    batches (recomputed for lineage, or never completed) are never asked for again.
    """
    taken = by_batch.pop(batch_ms, default)
    for stale in [t for t in by_batch if t < batch_ms]:
        del by_batch[stale]
    return taken
