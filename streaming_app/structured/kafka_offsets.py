"""Offsets of the structured Kafka source: JSON form and micro-batch planning (pure logic).

Driver side (the data source's planner worker), no Spark and no broker. An offset is
each partition's next offset to read, as Spark's own Kafka source writes it in the
query's `offsets/` log: `{"topic": {"0": 42, "1": 7}}`. A micro-batch reads
`[start, end)` of each partition, `start` the previous micro-batch's end.

Positions are planned with the DStream planner's rules (sources/kafka/offsets.py):
starting offsets, per-partition cap, out-of-range policy. Two cases differ, because Spark
derives a micro-batch's ranges from its start and end offsets alone: a partition that
appears (new partition, topic created late) and a partition whose position is beyond the
broker's latest (topic recreated) get their new position as the micro-batch's end with
nothing read, and are read from the next micro-batch on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming_app.sources.kafka.offsets import (
    BrokerOffsets,
    OffsetRange,
    TopicPartition,
    plan_ranges,
)

Positions = dict[TopicPartition, int]


def to_json(positions: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Positions as Spark's offset JSON: {topic: {partition: offset}}, sorted."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(positions):
        result.setdefault(topic, {})[str(partition)] = positions[(topic, partition)]
    return result


def from_json(offset: Mapping[str, Any] | None) -> Positions:
    """Inverse of `to_json`; raises ValueError on anything else (an edited offsets log)."""
    positions: Positions = {}
    for topic, partitions in (offset or {}).items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"malformed Kafka offset for topic {topic!r}: {partitions!r}")
        for partition, position in partitions.items():
            if not str(partition).isdigit() or type(position) is not int or position < 0:
                raise ValueError(f"malformed Kafka offset {topic}:{partition} = {position!r}")
            positions[(str(topic), int(partition))] = position
    return positions


@dataclass
class Planned:
    """Positions planned on the driver, with what the log should say about them."""

    positions: Positions
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def initial_positions(broker: BrokerOffsets, starting: str, on_out_of_range: str) -> Planned:
    """Where a new query starts on each partition: the `starting_offsets` setting applied."""
    plan = plan_ranges(None, broker, starting, 0, on_out_of_range)
    positions = {(r.topic, r.partition): r.from_offset for r in plan.ranges}
    return Planned(positions, plan.warnings, plan.notes)


def next_positions(
    start: Mapping[TopicPartition, int],
    broker: BrokerOffsets,
    starting: str,
    max_per_partition: int,
    on_out_of_range: str,
) -> Planned:
    """The end of the micro-batch that starts at `start`: up to the broker's latest, capped.

    max_per_partition: offsets one partition may advance per micro-batch (0 = no cap).
    An out-of-range start raises SourceDataLostError under on_out_of_range=fail.
    """
    plan = plan_ranges(dict(start) or None, broker, starting, max_per_partition, on_out_of_range)
    positions: Positions = {}
    for r in plan.ranges:
        tp = (r.topic, r.partition)
        if tp not in start or r.from_offset < start[tp]:
            # New partition, or beyond the broker's latest: take the position only.
            positions[tp] = r.from_offset
        else:
            # Below the broker's earliest under `earliest`: the executor's read skips the
            # lost records and counts them.
            positions[tp] = r.until_offset
    return Planned(positions, plan.warnings, plan.notes)


def ranges_between(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """The non-empty ranges `[start, end)` of a micro-batch, one per partition, sorted."""
    ranges = []
    for tp in sorted(end):
        begin = start.get(tp, end[tp])
        if end[tp] > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, end[tp]))
    return ranges
