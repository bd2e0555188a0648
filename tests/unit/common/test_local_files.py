"""A Hadoop path on the local file system as Python names it, and a local write over a file
Hadoop's local file system wrote (its `.crc` checksum goes first)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.common.hadoop_fs import local_file


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/tmp/out/a b", "/tmp/out/a b"),
        ("/tmp/out/../x/", "/tmp/x"),
        ("file:/tmp/out/50%25", "/tmp/out/50%25"),  # Hadoop takes a path string unescaped
        ("file:///tmp/out", "/tmp/out"),
        ("file://localhost/tmp/out", "/tmp/out"),
        ("file://otherhost/tmp/out", None),
        ("file:relative", None),
        ("hdfs://namenode:8020/out", None),
        ("s3a://bucket/out", None),
    ],
)
def test_a_paths_local_name(path: str, expected: str | None) -> None:
    assert local_file(path) == expected


def test_a_relative_path_is_the_working_directorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert local_file("out/x") == str(tmp_path / "out" / "x")


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
