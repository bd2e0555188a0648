"""The query's own checkpoint files: offsets log entries, batch ids, the query id.

Spark writes `offsets/<batch_id>` before it runs a micro-batch (a version line, then a JSON
line with `batchTimestampMs`, then the sources' offsets) and keeps it for a replay, so a
batch's timestamp is the same on every run of it: the sinks name their output by it, in
epoch ms like the DStream engine's batch times. `metadata` holds the query id, which stays
the same across restarts on one checkpoint. Read on the driver, through a FileSystem, and
by `checkpoint inspect` (tools/structured_inspect.py), without a JVM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from streaming_app.common.fs import FileSystem, join
from streaming_app.errors import CheckpointError

OFFSETS = "offsets"
COMMITS = "commits"
METADATA = "metadata"


@dataclass(frozen=True)
class OffsetsEntry:
    """One `offsets/<batch_id>` entry: the micro-batch's metadata and its sources' offsets."""

    version: str  # `v1`
    metadata: dict[str, Any]  # batchWatermarkMs, batchTimestampMs, conf
    # One per source, in the query's source order: the offset's JSON, None for `-` (no
    # offset yet, Spark's mark for a source that had nothing).
    sources: tuple[Any, ...]


def parse_offsets_entry(data: bytes) -> OffsetsEntry:
    """An offsets log entry (`v1`, the metadata JSON, a line per source); ValueError if not one."""
    lines = data.decode("utf-8").splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise ValueError("not an offsets log entry")
    metadata = json.loads(lines[1])
    if not isinstance(metadata, dict):
        raise ValueError("its metadata line is not a JSON object")
    sources = tuple(None if line == "-" else json.loads(line) for line in lines[2:])
    return OffsetsEntry(lines[0], metadata, sources)


def entry_timestamp(entry: OffsetsEntry) -> int:
    """`batchTimestampMs` of an offsets log entry; ValueError if it has none."""
    found = entry.metadata.get("batchTimestampMs")
    if type(found) is not int:
        raise ValueError("no batchTimestampMs")
    return found


def parse_batch_timestamp(data: bytes) -> int:
    """`batchTimestampMs` of an offsets log entry; ValueError if it is not one."""
    return entry_timestamp(parse_offsets_entry(data))


def offsets_entry(fs: FileSystem, checkpoint_dir: str, batch_id: int) -> OffsetsEntry | None:
    """Micro-batch `batch_id`'s offsets log entry, None if it has none."""
    path = join(join(checkpoint_dir, OFFSETS), str(batch_id))
    if batch_id < 0 or not fs.exists(path):
        return None
    try:
        return parse_offsets_entry(fs.read_bytes(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is unreadable ({exc})") from None


def batch_timestamp(fs: FileSystem, checkpoint_dir: str, batch_id: int) -> int | None:
    """The timestamp (epoch ms) Spark gave micro-batch `batch_id`, None if it has no entry."""
    entry = offsets_entry(fs, checkpoint_dir, batch_id)
    try:
        return None if entry is None else entry_timestamp(entry)
    except ValueError as exc:
        path = join(join(checkpoint_dir, OFFSETS), str(batch_id))
        raise CheckpointError(f"{path} is unreadable ({exc})") from None


def query_id(fs: FileSystem, checkpoint_dir: str) -> str:
    """The id of the query whose checkpoint this is (Spark's `metadata` file)."""
    path = join(checkpoint_dir, METADATA)
    try:
        found = json.loads(fs.read_bytes(path).decode("utf-8")).get("id")
    except (OSError, ValueError, UnicodeDecodeError, AttributeError) as exc:
        raise CheckpointError(f"{path} is unreadable ({exc})") from None
    if not isinstance(found, str) or not found:
        raise CheckpointError(f"{path} has no query id")
    return found


def batch_ids(fs: FileSystem, directory: str) -> list[int]:
    """The batch ids logged in `offsets/` or `commits/`, in order (temp and .crc files aside)."""
    return sorted(int(name) for name in fs.list_names(directory) if name.isdigit())


def last_batch(fs: FileSystem, directory: str) -> int | None:
    """The highest batch id logged in `offsets/` or `commits/`, None if none is."""
    ids = batch_ids(fs, directory)
    return ids[-1] if ids else None
