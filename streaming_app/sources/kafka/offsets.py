"""Kafka offset ranges and how each batch's ranges are planned (pure logic, no broker)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from streaming_app.errors import SourceDataLostError
from streaming_app.settings.rules import EXPLICIT_OFFSET_ITEM, STARTING_POLICIES

TopicPartition = tuple[str, int]


class OffsetRange(NamedTuple):
    """Records `[from_offset, until_offset)` of one partition: start included, end excluded."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        """Number of offsets in the range (records, unless the topic has gaps)."""
        return self.until_offset - self.from_offset


def explicit_offsets(spec: str) -> dict[TopicPartition, int]:
    """The per-partition offsets of an explicit starting-offsets spec (empty for a policy)."""
    if spec in STARTING_POLICIES:
        return {}
    offsets = {}
    for item in spec.split(","):
        match = EXPLICIT_OFFSET_ITEM.match(item)
        assert match is not None  # validated by parse_starting_offsets
        offsets[(match["topic"], int(match["partition"]))] = int(match["offset"])
    return offsets


def ranges_to_json(ranges: Iterable[OffsetRange]) -> list[list[str | int]]:
    """Ranges as JSON-ready lists: [topic, partition, from, until]."""
    return [[r.topic, r.partition, r.from_offset, r.until_offset] for r in ranges]


def ranges_from_json(items: Iterable[list[str | int]]) -> list[OffsetRange]:
    """Inverse of `ranges_to_json`; raises ValueError on a malformed item."""
    ranges = []
    for item in items:
        topic, partition, start, end = item
        if not isinstance(topic, str) or not all(
            isinstance(n, int) for n in (partition, start, end)
        ):
            raise ValueError(f"malformed offset range {item!r}")
        ranges.append(OffsetRange(topic, int(partition), int(start), int(end)))
    return ranges


@dataclass(frozen=True)
class BrokerOffsets:
    """What the broker said about the partitions of the subscribed topics, at one moment."""

    earliest: Mapping[TopicPartition, int]
    latest: Mapping[TopicPartition, int]
    committed: Mapping[TopicPartition, int | None] = field(default_factory=dict)


@dataclass
class Plan:
    """The ranges of one batch, plus what the planner wants the log to say about them."""

    ranges: list[OffsetRange]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _start_without_history(
    tp: TopicPartition,
    first_batch: bool,
    starting: str,
    broker: BrokerOffsets,
    notes: list[str],
) -> int:
    earliest, latest = broker.earliest[tp], broker.latest[tp]
    name = f"{tp[0]}:{tp[1]}"
    if not first_batch:
        notes.append(f"new partition {name}: reading from its earliest offset {earliest}")
        return earliest
    if starting == "latest":
        return latest
    if starting == "committed":
        committed = broker.committed.get(tp)
        if committed is None:
            notes.append(f"{name} has no committed offset for the group: starting at earliest")
            return earliest
        return committed
    explicit = explicit_offsets(starting)
    if tp in explicit:
        return explicit[tp]
    if explicit:
        notes.append(f"{name} is not in starting_offsets: starting at earliest")
    return earliest


def plan_ranges(
    previous_end: Mapping[TopicPartition, int] | None,
    broker: BrokerOffsets,
    starting: str,
    max_per_partition: int,
    on_out_of_range: str,
) -> Plan:
    """Plan the next batch's ranges.

    previous_end: each partition's end offset in the newest logged batch; None or empty
    while no partition has a position yet (the starting policy then applies). Every
    partition the broker reports is planned (an empty range when
    there is nothing new), so the log always carries each partition's position forward.
    max_per_partition: cap on the offsets of one partition per batch (0 = no cap).
    """
    first_batch = not previous_end
    previous = previous_end or {}
    plan = Plan(ranges=[])
    for tp in sorted(broker.latest):
        earliest, latest = broker.earliest[tp], broker.latest[tp]
        if tp in previous:
            start = previous[tp]
        else:
            start = _start_without_history(tp, first_batch, starting, broker, plan.notes)
        start = _check_in_range(tp, start, earliest, latest, on_out_of_range, plan.warnings)
        end = latest if max_per_partition <= 0 else min(latest, start + max_per_partition)
        plan.ranges.append(OffsetRange(tp[0], tp[1], start, end))
    for tp in sorted(set(previous) - set(broker.latest)):
        # The broker no longer reports it (topic deleted, or metadata lagging): keep its
        # position so that the partition resumes where it was if it comes back.
        plan.ranges.append(OffsetRange(tp[0], tp[1], previous[tp], previous[tp]))
        plan.warnings.append(f"partition {tp[0]}:{tp[1]} is missing from the broker's metadata")
    return plan


def _check_in_range(
    tp: TopicPartition,
    start: int,
    earliest: int,
    latest: int,
    policy: str,
    warnings: list[str],
) -> int:
    """The start offset, or what the out-of-range policy makes of it."""
    name = f"{tp[0]}:{tp[1]}"
    if earliest <= start <= latest:
        return start
    if start < earliest:
        problem = (
            f"offset {start} of {name} is out of range: the broker's earliest is {earliest} "
            f"(retention deleted {earliest - start} records that were never read)"
        )
    else:
        problem = (
            f"offset {start} of {name} is out of range: the broker's latest is {latest} "
            "(the topic was recreated or the broker lost data)"
        )
    if policy == "fail":
        raise SourceDataLostError(
            f"{problem}. Set on_offset_out_of_range=earliest to go on from the earliest "
            "offset (those records are lost), or restore the topic"
        )
    if start < earliest:
        warnings.append(f"{problem}; continuing from {earliest}: {earliest - start} records lost")
    else:
        warnings.append(f"{problem}; continuing from the earliest offset {earliest}")
    return earliest


def ends_of(ranges: Iterable[OffsetRange]) -> dict[TopicPartition, int]:
    """Each partition's end offset: where the next batch starts."""
    return {(r.topic, r.partition): r.until_offset for r in ranges}


def cap_for(max_rate_per_partition: int, batch_ms: int) -> int:
    """Records per partition per batch from a rate in records/second (0 = no cap)."""
    if max_rate_per_partition <= 0:
        return 0
    return max(1, max_rate_per_partition * batch_ms // 1000)
