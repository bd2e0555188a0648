"""Whether the checkpoint directory takes a write now, and the error a failed run ends with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from streaming_app.errors import SinkError, StreamingFailedError
from streaming_app.lifecycle import stopping
from streaming_app.lifecycle.writable import PROBE_PREFIX, unwritable


def test_a_writable_directory_is_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    assert unwritable(str(tmp_path)) is None
    assert os.listdir(tmp_path) == ["offsets"]  # the probe is gone


def test_a_directory_that_cannot_be_written_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "checkpoint"
    blocker.write_text("a file where the directory should be")
    assert unwritable(str(blocker)) == "Not a directory"
    assert not any(p.name.startswith(PROBE_PREFIX) for p in tmp_path.iterdir())


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    found: list[str] = []
    monkeypatch.setattr(stopping, "failed", found.append)
    return found


def test_a_failure_where_the_checkpoint_cannot_be_written_names_it(
    monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    monkeypatch.setattr(stopping, "unwritable", lambda d: "No space left on device")
    bare = StreamingFailedError("streaming failed: IOException: No space left on device; ...")
    error: Any = stopping._checkpoint_failure(bare, "/data/ckpt")
    assert type(error) is StreamingFailedError
    assert str(error) == (
        "streaming failed: the checkpoint directory /data/ckpt cannot be written (No space "
        "left on device); free space there or fix its permissions: a restart then resumes "
        "from the checkpoint"
    )
    assert counted == ["checkpoint"]


def test_other_failures_keep_their_own_message(
    monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    bare = StreamingFailedError("streaming failed: ValueError: x")
    monkeypatch.setattr(stopping, "unwritable", lambda d: None)
    assert stopping._checkpoint_failure(bare, "/data/ckpt") is bare
    # One of the app's own errors already says what to fix: the directory is not probed.
    monkeypatch.setattr(stopping, "unwritable", lambda d: pytest.fail("probed"))
    own = SinkError("the table is gone")
    assert stopping._checkpoint_failure(own, "/data/ckpt") is own
    assert stopping._checkpoint_failure(bare, None) is bare
    assert counted == []


class _Refusing:
    """A Hadoop file system whose writes raise `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def write_atomic(self, path: str, data: bytes) -> None:
        raise self.error

    def delete(self, path: str) -> None:
        raise AssertionError("nothing was written")


class _JavaError(Exception):
    """Py4J's error for a Java exception: it carries the Java exception."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.java_exception = self

    def toString(self) -> str:  # noqa: N802 (Java's name)
        return str(self)


def test_a_remote_directory_that_refuses_says_why_and_a_gone_jvm_says_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streaming_app.lifecycle import writable

    quota = _JavaError("org.apache.hadoop.hdfs.protocol.DSQuotaExceededException: quota")
    monkeypatch.setattr(writable, "filesystem_for", lambda d: _Refusing(quota))
    assert unwritable("hdfs://nn/ckpt") == "DSQuotaExceededException: quota"
    gone = ConnectionError("Answer from Java side is empty")  # no Java exception: no JVM
    monkeypatch.setattr(writable, "filesystem_for", lambda d: _Refusing(gone))
    assert unwritable("hdfs://nn/ckpt") is None
