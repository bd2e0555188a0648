"""`checkpoint inspect` of a Structured Streaming checkpoint (`run --engine structured`).

Read with plain file reads through the CheckpointFs, no JVM. The report's keys are stable
(`checkpoint inspect --json` prints it); times are epoch ms with a UTC rendering, sizes bytes:

- `checkpoint_dir`; `engine`: `structured`.
- `query`: `status` (`ok`, `none`, `unreadable`), `id` (from Spark's `metadata` file), `error`.
- `record`: the guard's `streaming_app_metadata.json` (structured/guard.py): `status` (`ok`,
  `none`, `unreadable`), `error`, and the record's fields (`engine`, `app_version`,
  `spark_version`, `settings`, ...) when it is readable.
- `batches`: `offsets_entries`, `commits_entries`, `last_planned` and `last_committed`
  (batch ids, null if none), `last_committed_time_ms`/`_utc` (its timestamp in the offsets
  log), `conf` (the SQL settings Spark keeps from the first run, from the newest entry),
  `pending`: the batches planned but not committed, each with `batch_id`,
  `batch_time_ms`/`_utc`, `watermark_ms`, `source_offsets` (one per source, the offset JSON
  as logged, null for `-`), `files` (per source: the files its log assigns the batch, null
  for a source without that log) and `error`.
- `sources`: one per `sources/<n>/` log: `source`, `entries`, `last_batch_id`.
- `state`: null without `state/`, else `directory`, `total_bytes` and `operators`
  (tools/structured_state.py: `operator_id`, `name`, `state_variables`, `partitions`,
  `declared_partitions`, `size_bytes`, `latest_version`, `oldest_latest_version`,
  `partition_details`: `partition`, `size_bytes`, `latest_version`; and `error`).
- `snapshots`, `sizes`: as for a DStream checkpoint.
- `notes`: things worth a look, as sentences.
"""

from __future__ import annotations

import json
from typing import Any

from streaming_app.common.checkpoint_files import checkpoint_file_times
from streaming_app.common.fs import join
from streaming_app.errors import CheckpointError
from streaming_app.recovery.guard import structured_checkpoint
from streaming_app.recovery.metadata import STRUCTURED_METADATA_FILE, metadata_json, read_metadata
from streaming_app.recovery.spark_checkpoint import CheckpointFs
from streaming_app.structured.query_log import (
    COMMITS,
    METADATA,
    OFFSETS,
    OffsetsEntry,
    batch_ids,
    parse_offsets_entry,
    query_id,
)
from streaming_app.tools.checkpoint_inspect import sizes_section, snapshots_section, utc
from streaming_app.tools.structured_state import STATE, state_section

SOURCES = "sources"
_READ_ERRORS = (OSError, ValueError, UnicodeDecodeError)


def is_structured(fs: CheckpointFs, checkpoint_dir: str) -> bool:
    """Whether a directory holds a Structured Streaming checkpoint, its metadata file lost too.

    The guard's test (a `metadata` file with a query id); without a metadata file that is
    JSON, Spark's `sources/` or `state/` folders, which no DStream checkpoint has.
    """
    if not fs.is_dir(checkpoint_dir):
        return False
    if structured_checkpoint(fs, checkpoint_dir):
        return True
    names = fs.list_names(checkpoint_dir)
    if checkpoint_file_times(names) or metadata_json(fs, checkpoint_dir) is not None:
        return False
    return any(fs.is_dir(join(checkpoint_dir, n)) for n in (SOURCES, STATE) if n in names)


def inspect_structured(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any]:
    """Everything worth knowing about a Structured Streaming checkpoint, as one JSON-ready dict."""
    report: dict[str, Any] = {
        "checkpoint_dir": checkpoint_dir,
        "engine": "structured",
        "query": _query(fs, checkpoint_dir),
        "record": _record(fs, checkpoint_dir),
        "batches": _batches(fs, checkpoint_dir),
        "sources": _sources(fs, checkpoint_dir),
        "state": state_section(fs, checkpoint_dir),
        "snapshots": snapshots_section(fs, checkpoint_dir, None),
        "sizes": sizes_section(fs, checkpoint_dir),
    }
    report["notes"] = _notes(report)
    return report


def _query(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any]:
    if METADATA not in fs.list_names(checkpoint_dir):
        return {"status": "none", "id": None, "error": None}
    try:
        return {"status": "ok", "id": query_id(fs, checkpoint_dir), "error": None}
    except CheckpointError as exc:
        return {"status": "unreadable", "id": None, "error": str(exc)}


def _record(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any]:
    try:
        record = read_metadata(fs, checkpoint_dir, STRUCTURED_METADATA_FILE)
    except CheckpointError as exc:
        return {"status": "unreadable", "error": str(exc)}
    if record is None:
        return {"status": "none", "error": None}
    fields = {k: v for k, v in record.to_json().items() if k != "format"}
    return {"status": "ok", "error": None, **fields}


def _entry(fs: CheckpointFs, checkpoint_dir: str, batch_id: int) -> OffsetsEntry | str:
    """The offsets log entry of a batch, or why it cannot be read."""
    path = join(join(checkpoint_dir, OFFSETS), str(batch_id))
    try:
        return parse_offsets_entry(fs.read_bytes(path))
    except _READ_ERRORS as exc:
        return f"{path} is unreadable ({exc})"


def _batches(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any]:
    planned = batch_ids(fs, join(checkpoint_dir, OFFSETS))
    committed = batch_ids(fs, join(checkpoint_dir, COMMITS))
    last_committed = committed[-1] if committed else None
    # Spark restarts after the last commit: what is planned beyond it runs (again).
    pending = [b for b in planned if last_committed is None or b > last_committed]
    section: dict[str, Any] = {
        "offsets_entries": len(planned),
        "commits_entries": len(committed),
        "last_planned": planned[-1] if planned else None,
        "last_committed": last_committed,
        "last_committed_time_ms": None,
        "last_committed_time_utc": None,
        "conf": None,
        "pending": [_pending(fs, checkpoint_dir, b) for b in pending],
        "errors": [],
    }
    if last_committed is not None:
        entry = _entry(fs, checkpoint_dir, last_committed)
        if isinstance(entry, OffsetsEntry):
            stamp = entry.metadata.get("batchTimestampMs")
            section["last_committed_time_ms"] = stamp
            section["last_committed_time_utc"] = utc(stamp) if isinstance(stamp, int) else None
        elif last_committed in planned:  # else purged from the offsets log: nothing to say
            section["errors"].append(entry)
    for batch_id in reversed(planned):
        entry = _entry(fs, checkpoint_dir, batch_id)
        if isinstance(entry, OffsetsEntry):
            section["conf"] = entry.metadata.get("conf")
            break
    return section


def _pending(fs: CheckpointFs, checkpoint_dir: str, batch_id: int) -> dict[str, Any]:
    found: dict[str, Any] = {
        "batch_id": batch_id,
        "batch_time_ms": None,
        "batch_time_utc": None,
        "watermark_ms": None,
        "source_offsets": None,
        "files": None,
        "error": None,
    }
    entry = _entry(fs, checkpoint_dir, batch_id)
    if not isinstance(entry, OffsetsEntry):
        return {**found, "error": entry}
    stamp = entry.metadata.get("batchTimestampMs")
    stamp = stamp if isinstance(stamp, int) else None
    found.update(
        batch_time_ms=stamp,
        batch_time_utc=utc(stamp),
        watermark_ms=entry.metadata.get("batchWatermarkMs"),
        source_offsets=list(entry.sources),
    )
    try:
        found["files"] = [
            source_files(fs, checkpoint_dir, n, batch_id) for n in range(len(entry.sources))
        ]
    except _READ_ERRORS as exc:
        found["error"] = f"the sources log is unreadable ({exc})"
    return found


def source_files(
    fs: CheckpointFs, checkpoint_dir: str, source: int, batch_id: int
) -> list[str] | None:
    """The files Spark's file source logged for a batch (`sources/<n>/<id>`, or in a compacted
    `<id>.compact`, entries `{"path", "timestamp", "batchId"}`); None without that entry."""
    directory = join(join(checkpoint_dir, SOURCES), str(source))
    names = set(fs.list_names(directory))
    name = next((n for n in (str(batch_id), f"{batch_id}.compact") if n in names), None)
    if name is None:
        return None
    lines = fs.read_bytes(join(directory, name)).decode("utf-8").splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError(f"{join(directory, name)} is not a file source log entry")
    records = [json.loads(line) for line in lines[1:] if line.strip()]
    return [str(r["path"]) for r in records if r.get("batchId", batch_id) == batch_id]


def _sources(fs: CheckpointFs, checkpoint_dir: str) -> list[dict[str, Any]]:
    directory = join(checkpoint_dir, SOURCES)
    found = []
    for name in sorted(fs.list_names(directory), key=lambda n: (len(n), n)):
        if not name.isdigit() or not fs.is_dir(join(directory, name)):
            continue
        ids = [
            int(entry.removesuffix(".compact"))
            for entry in fs.list_names(join(directory, name))
            if entry.removesuffix(".compact").isdigit()
        ]
        found.append(
            {"source": int(name), "entries": len(ids), "last_batch_id": max(ids, default=None)}
        )
    return found


def _notes(report: dict[str, Any]) -> list[str]:
    notes = []
    query, batches = report["query"], report["batches"]
    if query["status"] == "none":
        notes.append(
            "no metadata file: Spark writes it when a query starts; a query started here gets "
            "a new id (the files sink then starts a new chain)"
        )
    elif query["status"] == "unreadable":
        notes.append(f"metadata: {query['error']}: Spark cannot start a query on this checkpoint")
    record = report["record"]
    if record["status"] == "unreadable":
        notes.append(f"streaming_app record: {record['error']}: a run refuses the checkpoint")
    if batches["last_planned"] is None:
        notes.append("no micro-batch planned yet: a query started here begins from nothing")
    pending = [str(p["batch_id"]) for p in batches["pending"]]
    if pending:
        notes.append(
            f"planned but not committed: micro-batch {', '.join(pending)}; a restart runs it "
            "again with the source offsets logged for it"
        )
    notes += batches["errors"]
    notes += [p["error"] for p in batches["pending"] if p["error"]]
    for operator in (report["state"] or {}).get("operators", []):
        declared, on_disk = operator["declared_partitions"], operator["partitions"]
        if declared is not None and declared != on_disk:
            notes.append(
                f"state operator {operator['operator_id']}: {on_disk} partition folder(s) on "
                f"disk, {declared} in its metadata: the others' state is missing"
            )
        if operator["error"]:
            notes.append(f"state operator {operator['operator_id']}: {operator['error']}")
    return notes
