"""Planning Kafka batches without a broker: replay from the log, caps, draining, positions."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.errors import CheckpointError
from streaming_app.settings.loading import load_config
from streaming_app.sources.kafka.offset_log import OffsetLog
from streaming_app.sources.kafka.offsets import BrokerOffsets, OffsetRange
from streaming_app.sources.kafka.planner import ranges_for_batch
from streaming_app.sources.kafka.settings import KafkaSettings


def settings(tmp_path: Path, **overrides: object) -> KafkaSettings:
    config = load_config(
        env={},
        cli={"source": "kafka", "topics": "t", "checkpoint_dir": str(tmp_path), **overrides},
    )
    return KafkaSettings.from_config(config)


class FakeBroker:
    """Stands in for the broker's answers; counts how often it was asked."""

    def __init__(self, latest: dict) -> None:
        self.latest = latest
        self.calls: list[bool] = []

    def __call__(self, want_committed: bool) -> BrokerOffsets:
        self.calls.append(want_committed)
        return BrokerOffsets(earliest={tp: 0 for tp in self.latest}, latest=dict(self.latest))


def test_new_batch_is_logged_before_it_is_returned(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    broker = FakeBroker({("t", 0): 5, ("t", 1): 2})
    ranges = ranges_for_batch(1000, log, broker, settings(tmp_path))
    assert ranges == [OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 2)]
    assert log.read_ranges(1000) == ranges


def test_replay_uses_the_log_and_never_asks_the_broker(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path)
    first = ranges_for_batch(1000, log, FakeBroker({("t", 0): 5}), s)
    grown = FakeBroker({("t", 0): 50})
    assert ranges_for_batch(1000, log, grown, s) == first  # same batch again: same ranges
    assert grown.calls == []
    assert ranges_for_batch(2000, log, grown, s) == [OffsetRange("t", 0, 5, 50)]


def test_a_missing_entry_older_than_the_newest_is_an_error_not_a_new_plan(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path)
    ranges_for_batch(5000, log, FakeBroker({("t", 0): 5}), s)
    with pytest.raises(CheckpointError, match="batch_time_ms=3000"):
        ranges_for_batch(3000, log, FakeBroker({("t", 0): 9}), s)


def test_while_draining_new_batches_are_planned_empty_at_the_previous_ends(
    tmp_path: Path,
) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path)
    ranges_for_batch(1000, log, FakeBroker({("t", 0): 5, ("t", 1): 3}), s)
    broker = FakeBroker({("t", 0): 50, ("t", 1): 30})
    drained = ranges_for_batch(2000, log, broker, s, draining=True)
    assert drained == [OffsetRange("t", 0, 5, 5), OffsetRange("t", 1, 3, 3)]
    assert broker.calls == []
    assert log.read_ranges(2000) == drained
    # After the restart (no longer draining) the stream goes on from there.
    assert ranges_for_batch(3000, log, broker, s) == [
        OffsetRange("t", 0, 5, 50),
        OffsetRange("t", 1, 3, 30),
    ]


def test_committed_offsets_are_asked_for_only_before_the_first_batch(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path, starting_offsets="committed", group_id="g")
    broker = FakeBroker({("t", 0): 5})
    ranges_for_batch(1000, log, broker, s)
    ranges_for_batch(2000, log, broker, s)
    assert broker.calls == [True, False]


def test_cap_comes_from_rate_times_batch_interval(tmp_path: Path) -> None:
    s = settings(tmp_path, max_rate_per_partition="3", batch_interval="2")
    log = OffsetLog(LocalFs(), str(tmp_path))
    assert ranges_for_batch(2000, log, FakeBroker({("t", 0): 100}), s) == [
        OffsetRange("t", 0, 0, 6)
    ]


def test_committed_offsets_are_asked_for_until_a_partition_has_a_position(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path, starting_offsets="committed", group_id="g")
    missing = FakeBroker({})  # the topic does not exist yet
    assert ranges_for_batch(1000, log, missing, s) == []
    broker = FakeBroker({("t", 0): 5})
    ranges_for_batch(2000, log, broker, s)
    ranges_for_batch(3000, log, broker, s)
    assert missing.calls + broker.calls == [True, True, False]
