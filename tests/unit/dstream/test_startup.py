"""Setting aside checkpoint files that name lost state (dstream/startup.py), on a local
directory: the files of the failed time and newer renamed, an older one left to recover
from; with none older, one line that says what to do (exit 3)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.dstream.startup import set_aside_from
from streaming_app.errors import CheckpointError
from streaming_app.settings.loading import load_config
from streaming_app.settings.schema import AppConfig


def _checkpoint(tmp_path: Path, *times: int) -> Path:
    directory = tmp_path / "checkpoint"
    directory.mkdir()
    for t in times:
        for name in (f"checkpoint-{t}", f"checkpoint-{t}.bk"):
            (directory / name).write_bytes(b"x")
    return directory


def _config(directory: Path) -> AppConfig:
    return load_config(env={}, cli={"checkpoint_dir": str(directory)})


def test_the_failed_file_and_newer_are_set_aside_and_an_older_one_is_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = _checkpoint(tmp_path, 1000, 2000, 3000)
    with caplog.at_level(logging.WARNING):
        assert set_aside_from(LocalFs(), _config(directory), 2000, "rdd-7 gone") is None
    assert sorted(p.name for p in directory.iterdir()) == [
        "checkpoint-1000", "checkpoint-1000.bk",
        "unusable-ckpt-2000", "unusable-ckpt-2000.bk",
        "unusable-ckpt-3000", "unusable-ckpt-3000.bk",
    ]  # fmt: skip
    assert "batch_time_ms=2000 names state files that are gone (rdd-7 gone)" in caplog.text


def test_with_no_older_file_left_it_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    directory = _checkpoint(tmp_path, 2000, 3000)
    with pytest.raises(CheckpointError) as caught:
        set_aside_from(LocalFs(), _config(directory), 2000, "rdd-7 gone")
    assert str(caught.value) == (
        f"checkpoint {directory}: no usable checkpoint file is left (the newest readable one, "
        "batch_time_ms=2000, names state files that are gone: rdd-7 gone). Restart with "
        "--on-incompatible-checkpoint restore-from-snapshot to carry the totals over from the "
        "newest snapshot, or move the directory aside"
    )
    assert caught.value.exit_code == 3 and "\n" not in str(caught.value)
    # Nothing renamed: the operator's choice decides what happens to the files.
    assert sorted(p.name for p in directory.iterdir()) == [
        "checkpoint-2000", "checkpoint-2000.bk", "checkpoint-3000", "checkpoint-3000.bk",
    ]  # fmt: skip
