"""Range planning: starting points, caps, new and missing partitions, out-of-range policy."""

from __future__ import annotations

import pytest

from streaming_app.errors import SourceDataLostError
from streaming_app.settings.rules import parse_starting_offsets, parse_topics
from streaming_app.sources.kafka.offsets import (
    BrokerOffsets,
    OffsetRange,
    cap_for,
    ends_of,
    explicit_offsets,
    plan_ranges,
    ranges_from_json,
    ranges_to_json,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def broker(earliest: dict, latest: dict, committed: dict | None = None) -> BrokerOffsets:
    return BrokerOffsets(earliest=earliest, latest=latest, committed=committed or {})


def test_first_batch_from_earliest_takes_everything() -> None:
    plan = plan_ranges(None, broker({A0: 0, A1: 5}, {A0: 10, A1: 7}), "earliest", 0, "fail")
    assert plan.ranges == [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 7)]
    assert plan.warnings == []


def test_first_batch_from_latest_takes_nothing_but_records_the_position() -> None:
    plan = plan_ranges(None, broker({A0: 0}, {A0: 10}), "latest", 0, "fail")
    assert plan.ranges == [OffsetRange("a", 0, 10, 10)]


def test_committed_offsets_with_fallback_to_earliest() -> None:
    offsets = broker({A0: 0, A1: 2}, {A0: 10, A1: 9}, {A0: 4, A1: None})
    plan = plan_ranges(None, offsets, "committed", 0, "fail")
    assert plan.ranges == [OffsetRange("a", 0, 4, 10), OffsetRange("a", 1, 2, 9)]
    assert any("a:1 has no committed offset" in note for note in plan.notes)


def test_explicit_offsets_and_unlisted_partitions_from_earliest() -> None:
    plan = plan_ranges(None, broker({A0: 0, A1: 1}, {A0: 10, A1: 9}), "a:0=6", 0, "fail")
    assert plan.ranges == [OffsetRange("a", 0, 6, 10), OffsetRange("a", 1, 1, 9)]
    assert any("a:1 is not in starting_offsets" in note for note in plan.notes)


def test_next_batch_continues_from_previous_end() -> None:
    plan = plan_ranges(
        {A0: 10, A1: 7}, broker({A0: 0, A1: 0}, {A0: 15, A1: 7}), "latest", 0, "fail"
    )
    assert plan.ranges == [OffsetRange("a", 0, 10, 15), OffsetRange("a", 1, 7, 7)]


def test_cap_bounds_each_partition_and_the_rest_follows_next_batch() -> None:
    offsets = broker({A0: 0, A1: 0}, {A0: 100, A1: 3})
    first = plan_ranges(None, offsets, "earliest", 40, "fail")
    assert first.ranges == [OffsetRange("a", 0, 0, 40), OffsetRange("a", 1, 0, 3)]
    second = plan_ranges(ends_of(first.ranges), offsets, "earliest", 40, "fail")
    assert second.ranges == [OffsetRange("a", 0, 40, 80), OffsetRange("a", 1, 3, 3)]


def test_new_partition_while_running_starts_at_its_earliest_not_the_starting_policy() -> None:
    offsets = broker({A0: 0, A1: 3, B0: 0}, {A0: 10, A1: 8, B0: 4})
    plan = plan_ranges({A0: 10}, offsets, "latest", 0, "fail")
    assert plan.ranges == [
        OffsetRange("a", 0, 10, 10),
        OffsetRange("a", 1, 3, 8),
        OffsetRange("b", 0, 0, 4),
    ]
    assert sorted(n.split(":")[0] for n in plan.notes) == ["new partition a", "new partition b"]


def test_partition_missing_from_metadata_keeps_its_position() -> None:
    plan = plan_ranges({A0: 10, A1: 4}, broker({A0: 0}, {A0: 12}), "earliest", 0, "fail")
    assert plan.ranges == [OffsetRange("a", 0, 10, 12), OffsetRange("a", 1, 4, 4)]
    assert any("a:1 is missing" in w for w in plan.warnings)


def test_retention_gap_fails_by_default_with_what_to_do() -> None:
    with pytest.raises(SourceDataLostError) as info:
        plan_ranges({A0: 10}, broker({A0: 25}, {A0: 40}), "earliest", 0, "fail")
    message = str(info.value)
    assert "offset 10 of a:0" in message
    assert "15 records" in message
    assert "on_offset_out_of_range=earliest" in message
    assert info.value.exit_code == 4


def test_retention_gap_with_earliest_policy_warns_how_many_were_lost() -> None:
    plan = plan_ranges({A0: 10}, broker({A0: 25}, {A0: 40}), "earliest", 0, "earliest")
    assert plan.ranges == [OffsetRange("a", 0, 25, 40)]
    assert any("15 records lost" in w for w in plan.warnings)


def test_offsets_that_went_back_are_out_of_range_too() -> None:
    with pytest.raises(SourceDataLostError, match="recreated"):
        plan_ranges({A0: 50}, broker({A0: 0}, {A0: 5}), "earliest", 0, "fail")
    plan = plan_ranges({A0: 50}, broker({A0: 0}, {A0: 5}), "earliest", 0, "earliest")
    assert plan.ranges == [OffsetRange("a", 0, 0, 5)]


def test_explicit_start_beyond_the_log_follows_the_policy() -> None:
    with pytest.raises(SourceDataLostError):
        plan_ranges(None, broker({A0: 0}, {A0: 5}), "a:0=9", 0, "fail")


def test_cap_from_rate_and_batch_interval() -> None:
    assert cap_for(0, 1000) == 0
    assert cap_for(100, 2000) == 200
    assert cap_for(1, 500) == 1  # never a cap of zero: the stream must move


def test_ranges_round_trip_through_json() -> None:
    ranges = [OffsetRange("a", 0, 1, 5), OffsetRange("b.c", 3, 0, 0)]
    assert ranges_from_json(ranges_to_json(ranges)) == ranges
    with pytest.raises(ValueError):
        ranges_from_json([["a", "0", 1, 2]])


def test_parse_starting_offsets() -> None:
    assert parse_starting_offsets(" Earliest ") == "earliest"
    assert parse_starting_offsets("a:0=5, b:1=0") == "a:0=5,b:1=0"
    assert explicit_offsets("a:0=5,b:1=0") == {("a", 0): 5, ("b", 1): 0}
    assert explicit_offsets("latest") == {}
    for bad in ("", "oldest", "a:0", "a:x=1", "a:0=-1"):
        with pytest.raises(ValueError):
            parse_starting_offsets(bad)


def test_parse_topics() -> None:
    assert parse_topics("a, b,a") == ("a", "b")
    for bad in ("", " , ", "has space", "slash/y"):
        with pytest.raises(ValueError):
            parse_topics(bad)


def test_starting_policy_still_applies_after_batches_that_found_no_partitions() -> None:
    # The topic did not exist yet when the first batches were planned (empty plans).
    plan = plan_ranges({}, broker({A0: 0}, {A0: 10}, {A0: 7}), "committed", 0, "fail")
    assert plan.ranges == [OffsetRange("a", 0, 7, 10)]
    plan = plan_ranges({}, broker({A0: 0}, {A0: 10}), "latest", 0, "fail")
    assert plan.ranges == [OffsetRange("a", 0, 10, 10)]
