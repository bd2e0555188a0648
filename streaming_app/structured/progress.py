"""A micro-batch's progress as the app's metrics record (pure logic, no Spark).

Driver side: `structured/listener.py` hands each `onQueryProgress` event here as the JSON
of Spark's StreamingQueryProgress (`batchId`, `timestamp` of the trigger's start,
`numInputRows`, `durationMs`, `sources` with their `endOffset` and `latestOffset`). The
record has the DStream engine's fields (common/metrics_record.py, docs/metrics.md):

- `batch_time_ms`: the micro-batch's timestamp in the offsets log (what its output is
  named by, the same on a replay), else the trigger's start.
- `records`: `numInputRows`, the rows the sources read.
- `processing_ms`: the whole trigger (`durationMs.triggerExecution`): planning, reading,
  the state update and the sinks, and the offsets and commits logs.
- `scheduling_delay_ms`: how late the trigger started. A trigger waits for the next
  multiple of the interval; after a micro-batch that ran past it, the next one starts at
  once, that much late. Spark queues no micro-batches, so this delay never grows beyond
  about one micro-batch (falling behind shows as processing over the interval instead).
- `kafka_lag`: records on the broker beyond the micro-batch's end offsets when it was
  planned (the Kafka source reports the broker's latest), None for other sources.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.prometheus import PartitionPosition


@dataclass(frozen=True)
class Trigger:
    """When a micro-batch's trigger started (epoch ms) and how long it ran."""

    start_ms: int
    duration_ms: int


def parse_timestamp(text: str) -> int:
    """Spark's progress timestamp (`2026-11-24T20:00:01.123Z`) in epoch ms; ValueError if not."""
    stamp = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return round(stamp.timestamp() * 1000)


def trigger_of(progress: Mapping[str, Any]) -> Trigger:
    """The trigger of a progress event; ValueError (or KeyError) if the event lacks it."""
    durations = progress.get("durationMs") or {}
    duration = durations.get("triggerExecution", progress.get("batchDuration"))
    if type(duration) is not int:
        raise ValueError("no triggerExecution duration")
    return Trigger(parse_timestamp(str(progress["timestamp"])), duration)


def _boundary_after(ms: int, interval_ms: int) -> int:
    """The next multiple of the interval after `ms`, as Spark's ProcessingTimeExecutor."""
    return (ms // interval_ms + 1) * interval_ms


def trigger_delay(trigger: Trigger, interval_ms: int, previous: Trigger | None) -> int:
    """How late a trigger started, given the trigger of the micro-batch before (if seen).

    Spark times the next trigger at the multiple of the interval after this one's start.
    If the micro-batch before ran past it, the next trigger runs as soon as it ended, late
    by the difference; otherwise it waited for its time (0). An idle trigger (no new
    input, no micro-batch) in between also means the trigger waited for its time.
    """
    if previous is None or interval_ms <= 0:
        return 0
    due = _boundary_after(previous.start_ms, interval_ms)
    ended = previous.start_ms + previous.duration_ms
    if ended <= due or trigger.start_ms >= _boundary_after(ended, interval_ms):
        return 0
    return max(0, trigger.start_ms - due)


def _offsets(value: Any) -> Mapping[str, Any]:
    """A source offset as progress JSON holds it (an object, or its JSON text); {} if none."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, Mapping) else {}


def kafka_positions(progress: Mapping[str, Any]) -> list[PartitionPosition]:
    """Each partition's end offset after the micro-batch and the broker's latest at planning
    (`{"topic": {"0": 42}}`, as Spark's own Kafka source writes them); [] if not reported."""
    sources = progress.get("sources") or []
    if not sources:
        return []
    latest = _offsets(sources[0].get("latestOffset"))
    end = _offsets(sources[0].get("endOffset"))
    found = []
    for topic, partitions in latest.items():
        ends = end.get(topic)
        ends = ends if isinstance(ends, Mapping) else {}
        if not isinstance(partitions, Mapping):
            continue
        for partition, position in partitions.items():
            done = ends.get(partition, position)
            if isinstance(position, int) and isinstance(done, int) and partition.isdigit():
                found.append(PartitionPosition(topic, int(partition), done, position))
    return found


def kafka_lag(progress: Mapping[str, Any]) -> int | None:
    """Records beyond the micro-batch's end offsets at planning, over every partition.

    None when the source reported no latest offsets.
    """
    sources = progress.get("sources") or []
    if not sources or not _offsets(sources[0].get("latestOffset")):
        return None
    return sum(max(0, (p.latest or 0) - p.processed) for p in kafka_positions(progress))


def checkpoint_ms(progress: Mapping[str, Any]) -> int | None:
    """What the micro-batch's checkpoint took: its offsets log entry (`walCommit`), its
    commits log entry (`commitOffsets`) and the state stores' commits (`commitTimeMs`);
    None if Spark reported none of them."""
    durations = progress.get("durationMs") or {}
    parts = [durations.get("walCommit"), durations.get("commitOffsets")]
    parts += [op.get("commitTimeMs") for op in progress.get("stateOperators") or []]
    known = [p for p in parts if type(p) is int and p >= 0]
    return sum(known) if known else None


def state_keys(progress: Mapping[str, Any]) -> int | None:
    """Keys in the totals' state after the micro-batch (its aggregation's `numRowsTotal`)."""
    operators = progress.get("stateOperators") or []
    rows = operators[0].get("numRowsTotal") if operators else None
    return rows if type(rows) is int and rows >= 0 else None


def batch_metrics(
    progress: Mapping[str, Any],
    batch_ms: int | None,
    interval_ms: int,
    previous: Trigger | None,
    completed_ms: int,
    kafka: bool,
    words: int | None = None,
) -> BatchMetrics:
    """The metrics record of one micro-batch's progress event.

    batch_ms: its timestamp in the offsets log (None: the trigger's start is used);
    previous: the trigger of micro-batch `batchId - 1`, if this run saw it; words: what
    the micro-batch counted (problems.batch_words), None if not known.
    """
    trigger = trigger_of(progress)
    rows = progress.get("numInputRows")
    delay = trigger_delay(trigger, interval_ms, previous)
    return BatchMetrics(
        batch_time_ms=trigger.start_ms if batch_ms is None else batch_ms,
        batch_interval_ms=interval_ms,
        records=rows if type(rows) is int and rows >= 0 else None,
        processing_ms=trigger.duration_ms,
        scheduling_delay_ms=delay,
        total_delay_ms=delay + trigger.duration_ms,
        kafka_lag=kafka_lag(progress) if kafka else None,
        completed_ms=completed_ms,
        engine="structured",
        batch_id=int(progress["batchId"]),
        words=words,
        state_keys=state_keys(progress),
    )
