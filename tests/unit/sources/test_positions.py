"""The one position API: what a batch read, for each source, from the source's own log."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.sources.files_log import InputFilesLog
from streaming_app.sources.kafka.offset_log import OffsetLog
from streaming_app.sources.kafka.offsets import OffsetRange
from streaming_app.sources.positions import (
    PositionMissingError,
    batch_position,
    describe_position,
    files_read_between,
    kafka_position,
)


def test_a_kafka_position_is_each_range_end(tmp_path: Path) -> None:
    ranges = [OffsetRange("words", 0, 3, 10), OffsetRange("words", 1, 5, 5)]
    OffsetLog(LocalFs(), str(tmp_path)).write_ranges(2000, ranges)
    position = batch_position(LocalFs(), "kafka", str(tmp_path), 2000, required=True)
    assert position == {"kafka": [["words", 0, 10], ["words", 1, 5]]}
    assert position == kafka_position(ranges)
    assert describe_position(position) == "kafka: next offsets of 2 partition(s) of words"


def test_a_kafka_batch_missing_from_the_log_is_an_error_only_when_required(
    tmp_path: Path,
) -> None:
    assert batch_position(LocalFs(), "kafka", str(tmp_path), 2000) == {"kafka": []}
    with pytest.raises(PositionMissingError, match="batch_time_ms=2000"):
        batch_position(LocalFs(), "kafka", str(tmp_path), 2000, required=True)


def test_a_files_position_is_the_batch_files_and_accumulates_over_batches(
    tmp_path: Path,
) -> None:
    files = InputFilesLog(LocalFs(), str(tmp_path))
    files.write_files(1000, ["a.txt"])
    files.write_files(2000, ["c.txt", "b.txt"])
    assert batch_position(LocalFs(), "files", str(tmp_path), 2000) == {"files": ["b.txt", "c.txt"]}
    assert batch_position(LocalFs(), "files", str(tmp_path), 3000) == {"files": []}
    assert files_read_between(LocalFs(), str(tmp_path), None, 2000) == {"a.txt", "b.txt", "c.txt"}
    assert files_read_between(LocalFs(), str(tmp_path), 1000, 2000) == {"b.txt", "c.txt"}
    assert describe_position({"files": ["a", "b"]}) == "files: 2 input file(s) counted"


def test_a_socket_has_no_position(tmp_path: Path) -> None:
    assert batch_position(LocalFs(), "socket", str(tmp_path), 2000, required=True) == {}
    assert describe_position({}) == "none (a socket cannot be replayed)"
