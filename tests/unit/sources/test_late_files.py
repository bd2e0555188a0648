"""Files moved in too late for the file stream's window: made new again, unless ever read."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.recovery.snapshot_writer import files_in_snapshots
from streaming_app.recovery.snapshots import MANIFEST, Manifest, snapshot_name
from streaming_app.sources import late_files
from streaming_app.sources.files_log import PRESENT_AT_START, InputFilesLog
from streaming_app.sources.late_files import note_read, remember_ms, renew_late_files

HOUR_MS = 3600 * 1000
# A batch time an hour ago (a touched file's time, now, is after it); files' times are set
# relative to it.
BATCH_MS = int(time.time() * 1000) - HOUR_MS
WINDOW_MS = 60_000


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    late_files._KNOWN.clear()
    yield
    late_files._KNOWN.clear()


def _dirs(tmp_path: Path) -> tuple[Path, str, InputFilesLog]:
    inputs = tmp_path / "input"
    inputs.mkdir()
    checkpoint = str(tmp_path / "checkpoint")
    return inputs, checkpoint, InputFilesLog(LocalFs(), checkpoint)


def _file(directory: Path, name: str, mtime_ms: int) -> Path:
    path = directory / name
    path.write_text("w01\n")
    os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    return path


def _mtime_ms(path: Path) -> int:
    return path.stat().st_mtime_ns // 1_000_000


def _renew(inputs: Path, checkpoint: str, seeded: frozenset[str] = frozenset()) -> list[str]:
    return renew_late_files(None, BATCH_MS, str(inputs), checkpoint, WINDOW_MS, seeded)


def test_a_file_never_read_and_older_than_the_window_is_made_new_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inputs, checkpoint, entries = _dirs(tmp_path)
    entries.write_files(BATCH_MS - 3 * HOUR_MS, ["there-at-start.txt"], note=PRESENT_AT_START)
    late = _file(inputs, "written-earlier.txt", BATCH_MS - 2 * HOUR_MS)
    with caplog.at_level(logging.WARNING, logger=late_files.__name__):
        assert _renew(inputs, checkpoint) == ["written-earlier.txt"]
    assert _mtime_ms(late) > BATCH_MS  # now: after the batch, so a coming batch selects it
    [record] = caplog.records
    assert (
        "written-earlier.txt" in record.getMessage() and "cp makes a new one" in record.getMessage()
    )
    _file(inputs, "written-earlier.txt", BATCH_MS - 2 * HOUR_MS)  # not selected yet: again,
    with caplog.at_level(logging.WARNING, logger=late_files.__name__):
        assert _renew(inputs, checkpoint) == ["written-earlier.txt"]
    assert len(caplog.records) == 1  # named once


def test_files_read_present_at_start_seeded_or_in_the_window_are_left_alone(
    tmp_path: Path,
) -> None:
    inputs, checkpoint, entries = _dirs(tmp_path)
    entries.write_files(BATCH_MS - 3 * HOUR_MS, ["at-start.txt"], note=PRESENT_AT_START)
    entries.write_files(BATCH_MS - 2 * HOUR_MS, ["read.txt"])
    old = BATCH_MS - 2 * HOUR_MS
    paths = [_file(inputs, name, old) for name in ("at-start.txt", "read.txt", "seeded.txt")]
    paths.append(_file(inputs, "in-window.txt", BATCH_MS - WINDOW_MS + 1))
    paths.append(_file(inputs, ".hidden.txt", old))
    assert _renew(inputs, checkpoint, frozenset({"seeded.txt"})) == []
    assert [_mtime_ms(p) for p in paths] == [old, old, old, BATCH_MS - WINDOW_MS + 1, old]
    # A batch that reads a late file's name makes it known to this driver from then on.
    late = _file(inputs, "read-later.txt", old)
    note_read(checkpoint, ["read-later.txt"])
    assert _renew(inputs, checkpoint, frozenset({"seeded.txt"})) == []
    assert _mtime_ms(late) == old


def test_after_the_log_was_pruned_files_older_than_its_first_entry_are_left_alone(
    tmp_path: Path,
) -> None:
    inputs, checkpoint, entries = _dirs(tmp_path)
    horizon = BATCH_MS - 2 * HOUR_MS  # `checkpoint clean` removed the entries before it
    entries.write_files(horizon, ["kept.txt"])
    maybe_read = _file(inputs, "maybe-read.txt", horizon - 1)
    _file(inputs, "late.txt", horizon + 1)
    assert _renew(inputs, checkpoint) == ["late.txt"]
    assert _mtime_ms(maybe_read) == horizon - 1


@pytest.mark.parametrize(
    ("values", "batch_ms", "expected"),
    [
        ({}, 1000, 60_000),
        ({}, 7000, 63_000),  # rounded up to whole batches, as FileInputDStream does
        ({"spark.streaming.minRememberDuration": "90s"}, 1000, 90_000),
        ({"spark.streaming.fileStream.minRememberDuration": "30s"}, 1000, 30_000),
        ({"spark.streaming.fileStream.minRememberDuration": "2min"}, 1000, 120_000),
        ({"spark.streaming.fileStream.minRememberDuration": "90"}, 1000, 90_000),
        ({"spark.streaming.fileStream.minRememberDuration": "1500ms"}, 1000, 1000),  # whole seconds
    ],
)
def test_the_window_is_the_file_streams_remember_duration(
    values: dict[str, str], batch_ms: int, expected: int
) -> None:
    assert remember_ms(values, batch_ms) == expected


def test_a_log_pruned_by_the_snapshot_writer_is_completed_by_the_snapshots_list(
    tmp_path: Path,
) -> None:
    inputs, checkpoint, entries = _dirs(tmp_path)
    horizon = BATCH_MS - HOUR_MS  # the snapshot writer removed the entries before it
    entries.write_files(horizon, ["kept.txt"])
    read_before = _file(inputs, "read-before.txt", horizon - HOUR_MS)
    _file(inputs, "late.txt", horizon - HOUR_MS)

    def in_snapshot() -> frozenset[str]:
        return frozenset({"read-before.txt"})

    late = renew_late_files(
        None, BATCH_MS, str(inputs), checkpoint, WINDOW_MS, frozenset(), in_snapshot
    )
    assert late == ["late.txt"]
    assert _mtime_ms(read_before) == horizon - HOUR_MS


def test_the_snapshots_list_is_the_newest_snapshot_of_this_context(tmp_path: Path) -> None:
    def snapshot(batch_ms: int, context_id: str, files: list[str], whole: bool = True) -> None:
        path = tmp_path / snapshot_name(batch_ms)
        path.mkdir()
        if whole:
            position = {"files": files}
            manifest = Manifest(batch_ms, "files", batch_ms, "0.9", 1, 1, position, context_id)
            (path / MANIFEST).write_text(json.dumps(manifest.to_json()))

    assert files_in_snapshots(str(tmp_path), "ctx") is None
    snapshot(1000, "older-context", ["a"])
    assert files_in_snapshots(str(tmp_path), "ctx") is None
    snapshot(2000, "ctx", ["a", "b"])
    snapshot(3000, "ctx", ["c"], whole=False)  # no manifest (yet): not a snapshot
    assert files_in_snapshots(str(tmp_path), "ctx") == {"a", "b"}
