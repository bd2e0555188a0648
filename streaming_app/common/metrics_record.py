"""The per-batch metrics record: its fields, one JSON line per batch, the falling-behind rule.

Written by the driver's listener, read by `streaming-app report`.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


_REQUIRED = ("batch_time_ms", "batch_interval_ms", "completed_ms")


# records is null for the files source: Spark does not count what its file stream reads.
_NULLABLE = ("records", "processing_ms", "scheduling_delay_ms", "total_delay_ms", "kafka_lag")


@dataclass(frozen=True)
class BatchMetrics:
    """One completed batch, as the listener wrote it; None means unknown."""

    batch_time_ms: int
    batch_interval_ms: int
    records: int | None
    processing_ms: int | None
    scheduling_delay_ms: int | None
    total_delay_ms: int | None
    kafka_lag: int | None
    completed_ms: int
    # Which engine wrote the record: `dstream`, `structured`; None in files written before
    # the structured engine had metrics (all by the DStream engine).
    engine: str | None = None
    # The structured engine's micro-batch id; None for the DStream engine.
    batch_id: int | None = None
    # Words the batch counted (the word count; None for keyed sums, or not known) and keys
    # in the state after it (None if not known): see docs/metrics.md.
    words: int | None = None
    state_keys: int | None = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_line(line: str) -> BatchMetrics | None:
    """The batch of one metrics line, or None if the line is malformed."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if not all(_is_int(obj.get(key)) for key in _REQUIRED):
        return None
    if obj["batch_interval_ms"] <= 0:
        return None
    known: dict[str, int | None] = {}
    for key in _NULLABLE:
        value = obj.get(key)
        if value is not None and not _is_int(value):
            return None
        # Spark's BatchInfo says -1 for "unknown"; read it as the null it means.
        known[key] = value if value is not None and value >= 0 else None
    for key in ("words", "state_keys"):  # absent from files of earlier versions
        value = obj.get(key)
        if value is not None and not _is_int(value):
            return None
        known[key] = value
    engine = obj.get("engine")
    batch_id = obj.get("batch_id")
    return BatchMetrics(
        batch_time_ms=obj["batch_time_ms"],
        batch_interval_ms=obj["batch_interval_ms"],
        completed_ms=obj["completed_ms"],
        **known,
        engine=engine if isinstance(engine, str) else None,
        batch_id=batch_id if _is_int(batch_id) else None,
    )


def read_metrics(path: str | os.PathLike[str]) -> tuple[list[BatchMetrics], int]:
    """The batches of a metrics file sorted by batch time, and how many lines were malformed.

    A batch time written twice (a recovered run replays it) keeps its last record. Blank
    lines are ignored; OSError if the file cannot be read.
    """
    by_time: dict[int, BatchMetrics] = {}
    skipped = 0
    # errors="replace": a write cut inside a UTF-8 sequence is one malformed line, not a crash.
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            batch = parse_line(line)
            if batch is None:
                skipped += 1
                log.debug("malformed metrics line %s:%d skipped", path, number)
                continue
            by_time[batch.batch_time_ms] = batch  # a replayed batch: the last record wins
    return sorted(by_time.values(), key=lambda b: b.batch_time_ms), skipped


def delay_growing(delays_ms: Sequence[int], interval_ms: int, window: int = 5) -> bool:
    """Whether the last `window` delays strictly increased and the last exceeds the interval.

    That is a backlog building up: batches are queued faster than they are processed.
    Fewer than `window` delays are never growing.
    """
    if window < 2:
        raise ValueError("window must be at least 2")
    recent = list(delays_ms[-window:])
    if len(recent) < window:
        return False
    rising = all(a < b for a, b in itertools.pairwise(recent))
    return rising and recent[-1] > interval_ms
