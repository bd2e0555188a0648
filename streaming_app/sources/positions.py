"""A source's position: what its batches read, from the source's own log (driver side).

The one API for everything that records or shows a position: state snapshots, the
postgres sink's progress row and `checkpoint inspect`. A position is JSON:
`{"kafka": [[topic, partition, next_offset], ...]}` (each range's end, the next offset to
read), `{"files": [name, ...]}` (input files), or `{}` for a socket, which cannot be
replayed from a position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streaming_app.common.fs import FileSystem
from streaming_app.sources.files_log import InputFilesLog
from streaming_app.sources.kafka.offset_log import OffsetLog
from streaming_app.sources.kafka.offsets import OffsetRange


class PositionMissingError(RuntimeError):
    """The source's log has no entry for a batch that must have one."""


def kafka_position(ranges: Iterable[OffsetRange]) -> dict[str, Any]:
    """The position after Kafka ranges: each range's end, the next offset to read."""
    return {"kafka": [[r.topic, r.partition, r.until_offset] for r in ranges]}


def batch_position(
    fs: FileSystem, source: str, checkpoint_dir: str, batch_ms: int, required: bool = False
) -> dict[str, Any]:
    """What batch `batch_ms` read: Kafka end offsets, or its input files; {} for a socket.

    required: a Kafka batch that is not in the offset log raises PositionMissingError
    (otherwise it reads as no partitions).
    """
    if source == "kafka":
        ranges = OffsetLog(fs, checkpoint_dir).read_ranges(batch_ms)
        if ranges is None and required:
            raise PositionMissingError(f"the offset log has no entry for batch_time_ms={batch_ms}")
        return kafka_position(ranges or [])
    if source == "files":
        record = InputFilesLog(fs, checkpoint_dir).read(batch_ms) or {}
        return {"files": list(record.get("files", []))}
    return {}


def files_read_between(
    fs: FileSystem, checkpoint_dir: str, after_ms: int | None, until_ms: int
) -> set[str]:
    """The input files of every batch in (after_ms, until_ms]: a files position over time."""
    return InputFilesLog(fs, checkpoint_dir).files_between(after_ms, until_ms)


def describe_position(position: dict[str, Any]) -> str:
    """A position in a few words, for reports."""
    if "kafka" in position:
        items = position["kafka"]
        topics = ", ".join(sorted({str(item[0]) for item in items})) or "no topic"
        return f"kafka: next offsets of {len(items)} partition(s) of {topics}"
    if "files" in position:
        return f"files: {len(position['files'])} input file(s) counted"
    return "none (a socket cannot be replayed)"
