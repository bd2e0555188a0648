"""The offset and commit logs on the local filesystem: atomic, readable back, pruned."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.errors import CheckpointError
from streaming_app.sources.kafka.offset_log import CommitLog, OffsetLog, retention_ms, uncommitted
from streaming_app.sources.kafka.offsets import OffsetRange

RANGES = [OffsetRange("t", 0, 0, 7), OffsetRange("t", 1, 3, 3)]


@pytest.fixture
def offsets(tmp_path: Path) -> OffsetLog:
    return OffsetLog(LocalFs(), str(tmp_path))


def test_write_then_read_back(offsets: OffsetLog, tmp_path: Path) -> None:
    assert offsets.read_ranges(1000) is None
    offsets.write_ranges(1000, RANGES)
    assert offsets.read_ranges(1000) == RANGES
    record = json.loads((tmp_path / "offsets" / "1000").read_text())
    assert record == {
        "version": 1,
        "batch_time_ms": 1000,
        "ranges": [["t", 0, 0, 7], ["t", 1, 3, 3]],
    }
    assert offsets.newest() == (1000, RANGES)


def test_no_temp_file_is_left_and_none_is_taken_for_an_entry(
    offsets: OffsetLog, tmp_path: Path
) -> None:
    offsets.write_ranges(1000, RANGES)
    assert os.listdir(tmp_path / "offsets") == ["1000"]
    # What a crash mid-write leaves behind (ours or Hadoop's side files) is ignored.
    (tmp_path / "offsets" / ".2000.tmp").write_text('{"batch_time_ms": 20')
    (tmp_path / "offsets" / ".1000.crc").write_bytes(b"\0")
    assert offsets.batch_times() == [1000]
    assert offsets.read_ranges(2000) is None
    assert offsets.newest() == (1000, RANGES)


def test_a_failed_write_leaves_the_old_entry_whole(
    offsets: OffsetLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offsets.write_ranges(1000, RANGES)

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        offsets.write_ranges(1000, [OffsetRange("t", 0, 0, 99)])
    assert offsets.read_ranges(1000) == RANGES
    assert os.listdir(tmp_path / "offsets") == ["1000"]


def test_batch_times_sorted_numerically(offsets: OffsetLog) -> None:
    for batch_ms in (30000, 4000, 100000):
        offsets.write_ranges(batch_ms, RANGES)
    assert offsets.batch_times() == [4000, 30000, 100000]
    assert offsets.newest() == (100000, RANGES)


def test_prune_removes_old_entries_but_never_the_newest(offsets: OffsetLog) -> None:
    for batch_ms in (1000, 2000, 3000, 4000):
        offsets.write_ranges(batch_ms, RANGES)
    assert offsets.prune(3000) == [1000, 2000]
    assert offsets.batch_times() == [3000, 4000]
    assert offsets.prune(10**9) == [3000]
    assert offsets.batch_times() == [4000]


def test_unreadable_entry_says_what_to_do(offsets: OffsetLog, tmp_path: Path) -> None:
    offsets.write_ranges(1000, RANGES)
    (tmp_path / "offsets" / "1000").write_text("{not json")
    with pytest.raises(CheckpointError, match="Move the checkpoint directory aside"):
        offsets.read_ranges(1000)
    (tmp_path / "offsets" / "1000").write_text('{"batch_time_ms": 999, "ranges": []}')
    with pytest.raises(CheckpointError):
        offsets.read_ranges(1000)
    (tmp_path / "offsets" / "1000").write_text('{"batch_time_ms": 1000, "ranges": [[1]]}')
    with pytest.raises(CheckpointError, match="no valid ranges"):
        offsets.read_ranges(1000)


def test_uncommitted_lists_planned_batches_without_a_commit(
    offsets: OffsetLog, tmp_path: Path
) -> None:
    commits = CommitLog(LocalFs(), str(tmp_path))
    for batch_ms in (1000, 2000, 3000):
        offsets.write_ranges(batch_ms, RANGES)
    commits.write(1000, {"records": 7})
    assert uncommitted(offsets, commits) == [2000, 3000]
    assert commits.read(1000) == {"version": 1, "batch_time_ms": 1000, "records": 7}


def test_retention_covers_two_checkpoint_intervals_and_a_margin() -> None:
    assert retention_ms(1000, 10000) == 2 * 10000 + 100 * 1000


def test_prune_horizon_follows_the_oldest_spark_checkpoint_file() -> None:
    from streaming_app.sources.kafka.offset_log import prune_horizon

    assert prune_horizon(900_000, ["offsets", "commits"], 1000, 10_000) is None
    # Checkpoint files keep up: the retention window decides.
    names = ["checkpoint-890000", "checkpoint-895000.bk", "checkpoint-899000", "receivedBlocks"]
    assert prune_horizon(900_000, names, 1000, 10_000) == 900_000 - (2 * 10_000 + 100 * 1000)
    # Spark's checkpoint writer lags far behind: keep what a recovery from its files needs.
    lagging = ["checkpoint-500000", "checkpoint-501000"]
    assert prune_horizon(900_000, lagging, 1000, 10_000) == 500_000 - 10_000 - 10 * 1000


def test_newest_is_listed_once_then_kept_up_to_date(offsets: OffsetLog, tmp_path: Path) -> None:
    offsets.write_ranges(1000, RANGES)
    assert offsets.newest() == (1000, RANGES)
    later = [OffsetRange("t", 0, 7, 9)]
    offsets.write_ranges(2000, later)
    offsets.write_ranges(1000, RANGES)  # a replay rewrites an older entry: not the newest
    assert offsets.newest() == (2000, later)
    assert OffsetLog(LocalFs(), str(tmp_path)).newest() == (2000, later)  # as on disk


def test_a_window_keeps_the_log_back_as_far_as_it_reaches() -> None:
    from streaming_app.sources.kafka.offset_log import prune_horizon

    names = ["checkpoint-890000", "checkpoint-900000"]
    plain = prune_horizon(900_000, names, 1000, 10_000)
    assert plain is not None
    assert prune_horizon(900_000, names, 1000, 10_000, window_ms=300_000) == plain - 300_000
