"""Reading the query's own checkpoint files: batch timestamps, the query id, the last batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.errors import CheckpointError
from streaming_app.structured.query_log import (
    batch_ids,
    batch_timestamp,
    last_batch,
    parse_batch_timestamp,
    parse_offsets_entry,
    query_id,
)

# An offsets log entry as Spark 4 writes it: version, metadata, one line per source.
ENTRY = (
    'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1764000001234,"conf":{'
    '"spark.sql.shuffle.partitions":"2"}}\n{"logOffset":3}'
)


def test_the_batch_timestamp_is_read_from_the_offsets_log(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text(ENTRY)
    assert parse_batch_timestamp(ENTRY.encode()) == 1764000001234
    assert batch_timestamp(LocalFs(), str(tmp_path), 3) == 1764000001234
    assert batch_timestamp(LocalFs(), str(tmp_path), 2) is None
    assert batch_timestamp(LocalFs(), str(tmp_path), -1) is None


@pytest.mark.parametrize("text", ["", "v1\n", "v1\n{}\n", "v1\nnot json\n", "x\n{}\n"])
def test_an_unreadable_entry_is_a_checkpoint_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text(text)
    with pytest.raises(CheckpointError, match="offsets/0 is unreadable"):
        batch_timestamp(LocalFs(), str(tmp_path), 0)


def test_the_query_id_is_read_from_the_metadata_file(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text('{"id":"4b6a2f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"}\n')
    assert query_id(LocalFs(), str(tmp_path)) == "4b6a2f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
    (tmp_path / "metadata").write_text('{"format":"streaming-app-checkpoint-metadata"}\n')
    with pytest.raises(CheckpointError, match="no query id"):
        query_id(LocalFs(), str(tmp_path))


def test_the_last_batch_is_the_highest_logged_id(tmp_path: Path) -> None:
    assert last_batch(LocalFs(), str(tmp_path / "commits")) is None
    (tmp_path / "commits").mkdir()
    for name in ("0", "1", "10", ".10.crc", "9"):
        (tmp_path / "commits" / name).write_text("v1\n")
    assert last_batch(LocalFs(), str(tmp_path / "commits")) == 10


def test_an_offsets_entry_has_its_metadata_and_a_line_per_source() -> None:
    entry = parse_offsets_entry(ENTRY.encode())
    assert entry.version == "v1"
    assert entry.metadata["conf"] == {"spark.sql.shuffle.partitions": "2"}
    assert entry.sources == ({"logOffset": 3},)
    # `-`: a source without an offset yet.
    assert parse_offsets_entry((ENTRY + "\n-").encode()).sources == ({"logOffset": 3}, None)
    with pytest.raises(ValueError):
        parse_offsets_entry(b"v1\n[]")


def test_batch_ids_are_in_order(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    for name in ("10", "2", ".2.crc", ".3.9a8b.tmp", "1"):
        (tmp_path / "offsets" / name).write_text("v1\n")
    assert batch_ids(LocalFs(), str(tmp_path / "offsets")) == [1, 2, 10]
