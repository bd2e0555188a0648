"""Spark's file source log (`sources/0/` of the query's checkpoint): the files it counted.

Driver side, through a FileSystem, no JVM needed. The file source logs the files each of
its batches read, one JSON line each (`{"path", "timestamp", "batchId"}`) after a version
line, in `<id>` or, every few batches, `<id>.compact` (every entry up to `id`). A query's
offsets log names the source's batch (`{"logOffset": id}`): the files counted up to a
micro-batch are the log's entries up to that id.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from streaming_app.common.fs import FileSystem, join

SOURCES = "sources"
COMPACT = ".compact"


def parse_source_log(data: bytes) -> list[dict[str, Any]]:
    """The entries of one file source log file; ValueError if it is not one."""
    lines = data.decode("utf-8").splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError("not a file source log entry")
    return [json.loads(line) for line in lines[1:] if line.strip()]


def file_name(path: str) -> str:
    """The file name of a logged path (a URI, percent-encoded)."""
    return unquote(path.rstrip("/").rpartition("/")[2])


def log_offset(offset: Any) -> int:
    """The file source's batch id in a query's offsets log entry (-1: none yet)."""
    if offset is None:
        return -1
    if not isinstance(offset, dict) or type(offset.get("logOffset")) is not int:
        raise ValueError(f"not a file source offset: {offset!r}")
    return int(offset["logOffset"])


def files_up_to(fs: FileSystem, checkpoint_dir: str, last_id: int, source: int = 0) -> set[str]:
    """Names of the files the source's batches up to `last_id` read (its log entries)."""
    directory = join(join(checkpoint_dir, SOURCES), str(source))
    names = set(fs.list_names(directory))
    compacts = [
        int(n.removesuffix(COMPACT))
        for n in names
        if n.endswith(COMPACT) and n.removesuffix(COMPACT).isdigit()
    ]
    base = max((c for c in compacts if c <= last_id), default=-1)
    files: set[str] = set()
    if base >= 0:
        files |= _entries(fs, join(directory, f"{base}{COMPACT}"), last_id)
    for batch in range(base + 1, last_id + 1):
        if str(batch) not in names:
            raise ValueError(f"{join(directory, str(batch))} is missing")
        files |= _entries(fs, join(directory, str(batch)), last_id)
    return files


def _entries(fs: FileSystem, path: str, last_id: int) -> set[str]:
    records = parse_source_log(fs.read_bytes(path))
    return {file_name(str(r["path"])) for r in records if int(r.get("batchId", 0)) <= last_id}
