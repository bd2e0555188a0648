"""The query's own checkpoint files the sinks read: batch timestamps and the query id.

Spark writes `offsets/<batch_id>` before it runs a micro-batch (a version line, then a JSON
line with `batchTimestampMs`, then the sources' offsets) and keeps it for a replay, so a
batch's timestamp is the same on every run of it: the sinks name their output by it, in
epoch ms like the DStream engine's batch times. `metadata` holds the query id, which stays
the same across restarts on one checkpoint. Read on the driver, through a FileSystem.
"""

from __future__ import annotations

import json

from streaming_app.common.fs import FileSystem, join
from streaming_app.errors import CheckpointError

OFFSETS = "offsets"
COMMITS = "commits"
METADATA = "metadata"


def parse_batch_timestamp(data: bytes) -> int:
    """`batchTimestampMs` of an offsets log entry; ValueError if it is not one."""
    lines = data.decode("utf-8").splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise ValueError("not an offsets log entry")
    found = json.loads(lines[1]).get("batchTimestampMs")
    if type(found) is not int:
        raise ValueError("no batchTimestampMs")
    return found


def batch_timestamp(fs: FileSystem, checkpoint_dir: str, batch_id: int) -> int | None:
    """The timestamp (epoch ms) Spark gave micro-batch `batch_id`, None if it has no entry."""
    path = join(join(checkpoint_dir, OFFSETS), str(batch_id))
    if batch_id < 0 or not fs.exists(path):
        return None
    try:
        return parse_batch_timestamp(fs.read_bytes(path))
    except (ValueError, UnicodeDecodeError) as exc:
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


def last_batch(fs: FileSystem, directory: str) -> int | None:
    """The highest batch id logged in `offsets/` or `commits/`, None if none is."""
    ids = [int(name) for name in fs.list_names(directory) if name.isdigit()]
    return max(ids) if ids else None
