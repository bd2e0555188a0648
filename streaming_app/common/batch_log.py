"""A per-batch log: one JSON file per batch time under a directory, written atomically."""

from __future__ import annotations

import json
from typing import Any

from streaming_app.common.fs import FileSystem, join
from streaming_app.errors import CheckpointError

LOG_VERSION = 1


class BatchLog:
    """Entries named by batch time in epoch ms, each written atomically (temp + rename).

    Readers only look at names that are all digits, so a temp file left by a crash
    mid-write (`.<ms>.tmp`, or Hadoop's `.crc` side files) is never taken for an entry.
    """

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.directory = directory

    def path(self, batch_ms: int) -> str:
        """The file of one entry."""
        return join(self.directory, str(batch_ms))

    def batch_times(self) -> list[int]:
        """Batch times of all complete entries, oldest first."""
        return sorted(int(n) for n in self.fs.list_names(self.directory) if n.isdigit())

    def write(self, batch_ms: int, record: dict[str, Any]) -> None:
        """Write (or replace) the entry of `batch_ms`."""
        self.fs.mkdirs(self.directory)
        body = {"version": LOG_VERSION, "batch_time_ms": batch_ms, **record}
        self.fs.write_atomic(self.path(batch_ms), (json.dumps(body) + "\n").encode("utf-8"))

    def read(self, batch_ms: int) -> dict[str, Any] | None:
        """The entry of `batch_ms`, or None if there is none."""
        path = self.path(batch_ms)
        if not self.fs.exists(path):
            return None
        try:
            record = json.loads(self.fs.read_bytes(path).decode("utf-8"))
            if not isinstance(record, dict) or record.get("batch_time_ms") != batch_ms:
                raise ValueError("not an entry of this batch time")
        except ValueError as exc:
            raise CheckpointError(
                f"log entry {path} is unreadable ({exc}); it was not written by streaming_app "
                "or the storage corrupted it. Move the checkpoint directory aside to start "
                "afresh, or restore the file"
            ) from None
        return record

    def prune(self, before_ms: int) -> list[int]:
        """Delete entries older than `before_ms`, always keeping the newest; returns them."""
        times = self.batch_times()
        doomed = [t for t in times[:-1] if t < before_ms]
        for batch_ms in doomed:
            self.fs.delete(self.path(batch_ms))
        return doomed
