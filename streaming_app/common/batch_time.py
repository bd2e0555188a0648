"""Batch times: PySpark hands them over as naive local datetimes; we name things in epoch ms."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

T = TypeVar("T")


def epoch_ms(batch_time: datetime) -> int:
    """Epoch milliseconds (UTC) of a batch time, which PySpark hands over as naive local time."""
    return round(batch_time.timestamp() * 1000)


def spark_seconds(milliseconds: int) -> float:
    """Seconds for PySpark's duration arguments, which it truncates: int(seconds * 1000).

    ms / 1000 can come back as ms - 1 (int(2.01 * 1000) == 2009); half a millisecond
    more always truncates to exactly `milliseconds`.
    """
    return (milliseconds + 0.5) / 1000


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
