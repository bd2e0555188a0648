"""The structured postgres sink's rules, without a database: the progress row's position and
how a micro-batch goes in (replay skipped, changes applied, every total after a gap)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming_app.errors import EXIT_CRASH, SinkError
from streaming_app.sources.positions import describe_position
from streaming_app.structured.postgres_sink import (
    micro_batch_position,
    needs_every_total,
    plan_micro_batch,
    recorded_batch,
)

QUERY = "4b6a2f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"


def row(position: Any, batch_ms: int = 1764000001000) -> tuple[int, Any]:
    return batch_ms, position


def test_a_kafka_position_holds_the_end_offsets_as_the_dstream_engine_records_them() -> None:
    offset = {"words": {"1": 7, "0": 42}, "alpha": {"0": 3}}
    position = micro_batch_position(QUERY, 5, "kafka", offset)
    assert position == {
        "context": QUERY,
        "batch_id": 5,
        "kafka": [["alpha", 0, 3], ["words", 0, 42], ["words", 1, 7]],
    }
    assert describe_position(position) == "kafka: next offsets of 3 partition(s) of alpha, words"


def test_a_kafka_micro_batch_before_any_offset_has_no_partitions() -> None:
    assert micro_batch_position(QUERY, 0, "kafka", None)["kafka"] == []


def test_a_files_position_is_the_micro_batch_id() -> None:
    assert micro_batch_position(QUERY, 3, "files", {"logOffset": 3}) == {
        "context": QUERY,
        "batch_id": 3,
    }


def test_a_malformed_kafka_offset_is_refused() -> None:
    with pytest.raises(ValueError, match="malformed Kafka offset"):
        micro_batch_position(QUERY, 1, "kafka", {"words": {"0": -1}})


@pytest.mark.parametrize(
    ("previous", "found"),
    [
        (None, None),
        (row(None), None),
        (row({"context": QUERY, "batch_id": 4}), 4),
        (row({"context": "another-query", "batch_id": 4}), None),
        # What the DStream engine records: its app id, no micro-batch id.
        (row({"context": "app-20261124", "files": ["a.txt"]}), None),
        (row({"context": QUERY, "batch_id": "4"}), None),
        (row(["not", "a", "dict"]), None),
    ],
)
def test_the_recorded_micro_batch_is_this_querys_only(previous: Any, found: int | None) -> None:
    assert recorded_batch(previous, QUERY) == found


def plan(previous: Any, batch_id: int) -> bool | None:
    """What the sink decides before it writes; the writer's plan agrees under the lock."""
    every = needs_every_total(previous, QUERY, batch_id)
    assert plan_micro_batch("word_totals", QUERY, batch_id, bool(every))(previous) is every
    return every


@pytest.mark.parametrize("recorded", [5, 6, 9])
def test_a_micro_batch_the_row_records_is_a_replay(recorded: int) -> None:
    assert plan(row({"context": QUERY, "batch_id": recorded}), 5) is None


def test_the_micro_batch_after_the_recorded_one_applies_its_changes() -> None:
    assert plan(row({"context": QUERY, "batch_id": 4}), 5) is False
    assert plan(row({"context": QUERY, "batch_id": 0}), 1) is False


@pytest.mark.parametrize(
    "previous",
    [
        None,  # a new table
        row(None),  # a progress row without a position
        row({"context": "another-query", "batch_id": 12}),  # a new checkpoint
        row({"context": "app-20261124", "kafka": []}),  # the DStream engine's table
    ],
)
def test_micro_batch_0_of_a_query_the_row_does_not_record_replaces_the_table(
    previous: Any,
) -> None:
    assert plan(previous, 0) is True


def test_micro_batch_0_recorded_is_still_a_replay() -> None:
    assert plan(row({"context": QUERY, "batch_id": 0}), 0) is None


@pytest.mark.parametrize(
    "previous",
    [
        None,  # the sink added to a query that ran, or the table dropped
        row({"context": QUERY, "batch_id": 2}),  # micro-batches 3 and 4 missing
        row({"context": "app-20261124", "files": []}),  # another run wrote the table
    ],
)
def test_a_later_micro_batch_after_a_gap_writes_every_total(previous: Any) -> None:
    assert plan(previous, 5) is True


def test_changes_alone_are_refused_if_the_row_moved_since_it_was_read() -> None:
    moved = row({"context": "another-query", "batch_id": 7})
    with pytest.raises(SinkError) as info:
        plan_micro_batch("word_totals", QUERY, 5, False)(moved)
    message = str(info.value)
    assert "table word_totals changed while micro-batch 5" in message
    assert "own postgres_table" in message
    assert info.value.exit_code == EXIT_CRASH
