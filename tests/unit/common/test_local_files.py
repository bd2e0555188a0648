"""A path on the local file system as Python names it, and a local write over a file
Hadoop's local file system wrote (its `.crc` checksum goes first)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs, local_path, write_local_atomic


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/tmp/out/a b", "/tmp/out/a b"),
        ("out/x", "out/x"),
        ("file:/tmp/out/50%25", "/tmp/out/50%25"),  # Hadoop takes a path string unescaped
        ("file:///tmp/out", "/tmp/out"),
        ("file://localhost/tmp/out", "/tmp/out"),
        ("file://otherhost/tmp/out", None),
        ("hdfs://namenode:8020/out", None),
        ("s3a://bucket/out", None),
        ("s3a:/bucket/out", None),  # a scheme, as Hadoop's Path reads it
    ],
)
def test_a_paths_local_name(path: str, expected: str | None) -> None:
    assert local_path(path) == expected


def test_a_local_write_removes_the_checksum_of_the_file_it_replaces(tmp_path: Path) -> None:
    target, crc = tmp_path / "commit-1", tmp_path / ".commit-1.crc"
    target.write_bytes(b"old")
    crc.write_bytes(b"checksum of old")
    other = tmp_path / ".other.crc"
    other.write_bytes(b"another file's")
    LocalFs().write_atomic(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert not crc.exists()
    assert other.exists()  # only the replaced file's
    assert sorted(os.listdir(tmp_path)) == [".other.crc", "commit-1"]  # no temp file left


def test_a_write_as_hadoop_would_makes_its_directory_and_the_file_0644(tmp_path: Path) -> None:
    target = tmp_path / "new" / "dir" / "_SUCCESS"
    write_local_atomic(str(target), b"", mode=0o644, parents=True)
    assert target.read_bytes() == b""
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    with pytest.raises(FileNotFoundError):  # without `parents`, as LocalFs writes
        write_local_atomic(str(tmp_path / "missing" / "x"), b"")


def test_a_write_cut_short_leaves_no_temp_and_names_it_as_checkpoint_clean_knows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streaming_app.tools.checkpoint_clean import _TEMP

    temps: list[str] = []

    def crash(source: str, target: str) -> None:
        temps.append(os.path.basename(source))
        raise OSError("the rename failed")

    monkeypatch.setattr(os, "replace", crash)
    for name in ("streaming_app_metadata.json", "restored-from-snapshot.json", "1000"):
        with pytest.raises(OSError, match="the rename failed"):
            write_local_atomic(str(tmp_path / name), b"x")
    assert len(temps) == 3 and all(_TEMP.match(temp) for temp in temps), temps
    assert os.listdir(tmp_path) == []  # each removed when its write failed
