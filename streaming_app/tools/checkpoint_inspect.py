"""`checkpoint inspect`: the facts about a checkpoint directory, as one JSON-ready dict.

The report's keys are stable (`checkpoint inspect --json` prints it). Times are epoch
milliseconds (`*_ms`) with a UTC rendering (`*_utc`), sizes bytes (`*_bytes`):

- `checkpoint_dir`; `engine`: `dstream` (a Structured Streaming checkpoint's report, with
  `engine` `structured`, is in tools/structured_inspect.py); `verified`: whether Spark
  itself tried to read the checkpoint files.
- `spark_files`: Spark's `checkpoint-<ms>[.bk]` files, newest first, each with `name`,
  `batch_time_ms`, `batch_time_utc`, `backup`, `size_bytes`, `readable` (true, false, or
  null when not verified), `checkpoint_time_ms` (the batch time inside, which may be
  older than the name's), `error`, `rdd_refs` (`<uuid>/rdd-<n>` folders it references)
  and `missing_rdds` (those no longer on disk: recovery from that file would fail).
- `latest_checkpoint`: `batch_time_ms`, `batch_time_utc` of the newest file, and
  `recovers_from`: the file Spark would recover from (the newest readable one; null if
  none is or when not verified).
- `set_aside_files`: checkpoint files an earlier start renamed `unusable-ckpt-<ms>[.bk]`
  (they name RDD checkpoints that are gone); Spark no longer reads them.
- `metadata`: `status` (`ok`, `none`, `unreadable`), `record` (the metadata fields), `error`.
- `offsets`: null without an offset log, else `entries`, `commits`, `tail` (the last
  entries: `batch_time_ms`, `batch_time_utc`, `records`, `ranges` as [topic, partition,
  from, until], `committed`) and `uncommitted` (batch times planned but not committed).
- `input_files`: null without that log, else `entries` and `tail` (`batch_time_ms`,
  `batch_time_utc`, `files`, `note`). A tail entry that cannot be read has its values
  null and an `error`.
- `snapshots`: `directory`, `count`, `latest` (`path`, `batch_time_ms`, `batch_time_utc`,
  `words`, `total`, `position`) or null.
- `sizes`: `entries` (bytes per top-level name) and `total_bytes`.
- `rdd_folders`: one per `<uuid>` folder: `name`, `size_bytes`, `newest`, `rdds` (`name`,
  `size_bytes`, `referenced`: true/false, or null when some file's references are unknown).
- `kafka_lag`: `status` (`ok`, `skipped`, `unreachable`, `not_kafka`), `note`,
  `bootstrap_servers`, `batch_time_ms` (the last committed batch), `partitions`
  (`topic`, `partition`, `end_offset`, `latest_offset`, `lag`) and `total_lag`.
- `notes`: things worth a look, as sentences.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from streaming_app.common.checkpoint_files import CHECKPOINT_FILE
from streaming_app.common.fs import join
from streaming_app.errors import CheckpointError, ConfigError
from streaming_app.recovery.metadata import METADATA_FILE, CheckpointMetadata, read_metadata
from streaming_app.recovery.snapshots import latest_snapshot, snapshot_times
from streaming_app.recovery.spark_checkpoint import (
    UNUSABLE_PREFIX,
    UUID_NAME,
    CheckpointFs,
    CheckpointProbe,
    FileCheck,
    RddFolder,
    SparkFile,
    newest_rdd_folder,
    rdd_folders,
    spark_files,
)
from streaming_app.sources.files_log import INPUT_FILES_DIR, InputFilesLog
from streaming_app.sources.kafka.offset_log import (
    COMMITS_DIR,
    OFFSETS_DIR,
    CommitLog,
    OffsetLog,
    uncommitted,
)
from streaming_app.sources.kafka.offsets import TopicPartition, ranges_to_json
from streaming_app.sources.positions import describe_position

TAIL = 10
# Asks the brokers for the latest offsets of the topics' partitions; raises OSError.
LatestOffsets = Callable[[str, list[str]], dict[TopicPartition, int]]
_CHECKPOINT_ENTRIES = (METADATA_FILE, OFFSETS_DIR, COMMITS_DIR, INPUT_FILES_DIR, "kafka-tick",
                       "receivedBlockMetadata", "receivedData")  # fmt: skip


def utc(ms: int | None) -> str | None:
    """Epoch ms as `YYYY-MM-DD HH:MM:SS.mmm` (UTC)."""
    if ms is None:
        return None
    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def ensure_checkpoint_dir(fs: CheckpointFs, checkpoint_dir: str) -> None:
    """ConfigError unless the directory holds a checkpoint of Spark or of streaming_app."""
    if not fs.exists(checkpoint_dir):
        raise ConfigError(f"{checkpoint_dir}: no such directory")
    if not fs.is_dir(checkpoint_dir):
        raise ConfigError(f"{checkpoint_dir} is a file, not a checkpoint directory")
    names = fs.list_names(checkpoint_dir)
    if not any(
        CHECKPOINT_FILE.match(n) or UUID_NAME.match(n) or n in _CHECKPOINT_ENTRIES for n in names
    ):
        raise ConfigError(
            f"{checkpoint_dir} is not a checkpoint directory (no checkpoint-<ms> files, "
            "metadata, offset log or RDD checkpoint folders)"
        )


def read_metadata_or_none(fs: CheckpointFs, checkpoint_dir: str) -> CheckpointMetadata | None:
    """The metadata record, or None if there is none or it is unreadable."""
    try:
        return read_metadata(fs, checkpoint_dir)
    except CheckpointError:
        return None


def snapshot_dir_of(
    fs: CheckpointFs, checkpoint_dir: str, metadata: CheckpointMetadata | None
) -> str | None:
    """Where this checkpoint's snapshots are: the recorded local directory, else the default."""
    recorded = metadata.settings.get("snapshot_dir") if metadata else None
    if isinstance(recorded, str) and "://" not in recorded and fs.exists(recorded):
        return recorded
    default = join(checkpoint_dir, "snapshots")
    return default if fs.exists(default) else None


def inspect_checkpoint(
    fs: CheckpointFs,
    checkpoint_dir: str,
    probe: CheckpointProbe,
    bootstrap_servers: str | None = None,
    latest_offsets: LatestOffsets | None = None,
) -> dict[str, Any]:
    """Everything worth knowing about a checkpoint directory; ConfigError if it is not one."""
    ensure_checkpoint_dir(fs, checkpoint_dir)
    files = spark_files(fs, checkpoint_dir)
    checks = {f.name: probe.check(join(checkpoint_dir, f.name)) for f in files}
    folders = rdd_folders(fs, checkpoint_dir)
    present = {f"{folder.name}/{rdd.name}" for folder in folders for rdd in folder.rdds}
    metadata, metadata_section = _metadata(fs, checkpoint_dir)
    report: dict[str, Any] = {
        "checkpoint_dir": checkpoint_dir,
        "engine": "dstream",
        "verified": probe.verifies,
        "spark_files": [_file_entry(f, checks[f.name], present) for f in files],
        "latest_checkpoint": _latest(files, checks),
        "set_aside_files": sorted(
            n for n in fs.list_names(checkpoint_dir) if n.startswith(UNUSABLE_PREFIX + "ckpt-")
        ),
        "metadata": metadata_section,
        "offsets": _offsets(fs, checkpoint_dir),
        "input_files": _input_files(fs, checkpoint_dir),
        "snapshots": snapshots_section(fs, checkpoint_dir, metadata),
        "sizes": sizes_section(fs, checkpoint_dir),
        "rdd_folders": _folders(folders, list(checks.values())),
        "kafka_lag": _lag(fs, checkpoint_dir, metadata, bootstrap_servers, latest_offsets),
    }
    report["notes"] = _notes(report)
    return report


def _file_entry(file: SparkFile, check: FileCheck, present: set[str]) -> dict[str, Any]:
    refs = None if check.rdd_refs is None else sorted(check.rdd_refs)
    return {
        "name": file.name,
        "batch_time_ms": file.batch_ms,
        "batch_time_utc": utc(file.batch_ms),
        "backup": file.backup,
        "size_bytes": file.size,
        "readable": check.readable,
        "checkpoint_time_ms": check.checkpoint_time_ms,
        "error": check.error,
        "rdd_refs": refs,
        "missing_rdds": None if refs is None else [r for r in refs if r not in present],
    }


def _latest(files: list[SparkFile], checks: dict[str, FileCheck]) -> dict[str, Any]:
    newest = files[0].batch_ms if files else None
    # Spark tries the newest file first, a file before its .bk copy: the order of `files`.
    readable = [f.name for f in files if checks[f.name].readable]
    return {
        "batch_time_ms": newest,
        "batch_time_utc": utc(newest),
        "recovers_from": readable[0] if readable else None,
    }


def _metadata(
    fs: CheckpointFs, checkpoint_dir: str
) -> tuple[CheckpointMetadata | None, dict[str, Any]]:
    try:
        metadata = read_metadata(fs, checkpoint_dir)
    except CheckpointError as exc:
        return None, {"status": "unreadable", "record": None, "error": str(exc)}
    if metadata is None:
        return None, {"status": "none", "record": None, "error": None}
    record = {k: v for k, v in metadata.to_json().items() if k != "format"}
    return metadata, {"status": "ok", "record": record, "error": None}


def _offsets(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any] | None:
    offsets, commits = OffsetLog(fs, checkpoint_dir), CommitLog(fs, checkpoint_dir)
    if not fs.exists(offsets.directory) and not fs.exists(commits.directory):
        return None
    times, done = offsets.batch_times(), set(commits.batch_times())
    tail = []
    for batch_ms in times[-TAIL:]:
        entry: dict[str, Any] = {"batch_time_ms": batch_ms, "batch_time_utc": utc(batch_ms)}
        try:
            ranges = offsets.read_ranges(batch_ms) or []
            entry.update(records=sum(r.size for r in ranges), ranges=ranges_to_json(ranges))
        except CheckpointError as exc:
            entry.update(records=None, ranges=None, error=str(exc))
        tail.append({**entry, "committed": batch_ms in done})
    return {
        "entries": len(times),
        "commits": len(done),
        "tail": tail,
        "uncommitted": uncommitted(offsets, commits),
    }


def _input_files(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any] | None:
    files_log = InputFilesLog(fs, checkpoint_dir)
    if not fs.exists(files_log.directory):
        return None
    times = files_log.batch_times()
    tail = []
    for batch_ms in times[-TAIL:]:
        entry: dict[str, Any] = {"batch_time_ms": batch_ms, "batch_time_utc": utc(batch_ms)}
        try:
            record = files_log.read(batch_ms) or {}
            entry.update(files=list(record.get("files", [])), note=record.get("note"))
        except CheckpointError as exc:
            entry.update(files=None, note=None, error=str(exc))
        tail.append(entry)
    return {"entries": len(times), "tail": tail}


def snapshots_section(
    fs: CheckpointFs, checkpoint_dir: str, metadata: CheckpointMetadata | None
) -> dict[str, Any]:
    """The `snapshots` section: where they are, how many, the newest one's facts."""
    directory = snapshot_dir_of(fs, checkpoint_dir, metadata)
    section: dict[str, Any] = {"directory": directory, "count": 0, "latest": None}
    if directory is None:
        return section
    section["count"] = len(snapshot_times(fs, directory))
    found = latest_snapshot(fs, directory)
    if found is not None:
        path, manifest = found
        section["latest"] = {
            "path": path,
            "batch_time_ms": manifest.batch_time_ms,
            "batch_time_utc": utc(manifest.batch_time_ms),
            "words": manifest.words,
            "total": manifest.total,
            "position": describe_position(manifest.position),
        }
    return section


def sizes_section(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any]:
    """The `sizes` section: bytes per top-level entry, and in all."""
    names = sorted(fs.list_names(checkpoint_dir))
    entries = {name: fs.size(join(checkpoint_dir, name)) for name in names}
    return {"entries": entries, "total_bytes": sum(entries.values())}


def _folders(folders: list[RddFolder], checks: list[FileCheck]) -> list[dict[str, Any]]:
    known = [c.rdd_refs for c in checks if c.rdd_refs is not None]
    referenced = frozenset().union(*known)
    complete = len(known) == len(checks)  # else "not referenced" is not known for sure
    newest = newest_rdd_folder(folders)

    def is_referenced(ref: str) -> bool | None:
        return True if ref in referenced else (False if complete else None)

    return [
        {
            "name": folder.name,
            "size_bytes": folder.size,
            "newest": folder.name == newest,
            "rdds": [
                {
                    "name": rdd.name,
                    "size_bytes": rdd.size,
                    "referenced": is_referenced(f"{folder.name}/{rdd.name}"),
                }
                for rdd in folder.rdds
            ],
        }
        for folder in folders
    ]


def _lag(
    fs: CheckpointFs,
    checkpoint_dir: str,
    metadata: CheckpointMetadata | None,
    bootstrap_servers: str | None,
    latest_offsets: LatestOffsets | None,
) -> dict[str, Any]:
    section: dict[str, Any] = {
        "status": "skipped",
        "note": None,
        "bootstrap_servers": bootstrap_servers,
        "batch_time_ms": None,
        "partitions": [],
        "total_lag": None,
    }
    offsets, commits = OffsetLog(fs, checkpoint_dir), CommitLog(fs, checkpoint_dir)
    if not (metadata and metadata.source == "kafka") and not offsets.batch_times():
        return {**section, "status": "not_kafka"}
    committed = commits.batch_times()
    try:
        ranges = offsets.read_ranges(committed[-1]) if committed else None
    except CheckpointError as exc:
        return {**section, "note": str(exc)}
    if not ranges:
        return {**section, "note": "no committed batch with logged offsets yet"}
    if not bootstrap_servers or latest_offsets is None:
        note = "no broker given (--bootstrap-servers or STREAMING_APP_BOOTSTRAP_SERVERS)"
        return {**section, "note": note}
    ends = {(r.topic, r.partition): r.until_offset for r in ranges}
    topics = {r.topic for r in ranges}
    if metadata is not None:
        topics |= {str(t) for t in metadata.settings.get("topics") or []}
    try:
        latest = latest_offsets(bootstrap_servers, sorted(topics))
    except OSError as exc:
        return {**section, "status": "unreachable", "note": str(exc)}
    partitions = []
    for tp in sorted(set(ends) | set(latest)):
        end, newest = ends.get(tp), latest.get(tp)
        lag = newest - end if end is not None and newest is not None else None
        partitions.append(
            {"topic": tp[0], "partition": tp[1], "end_offset": end, "latest_offset": newest,
             "lag": lag}
        )  # fmt: skip
    lags = [p["lag"] for p in partitions if p["lag"] is not None]
    return {
        **section,
        "status": "ok",
        "batch_time_ms": committed[-1],
        "partitions": partitions,
        "total_lag": sum(lags) if lags else None,
    }


def _notes(report: dict[str, Any]) -> list[str]:
    notes = []
    files, recovers = report["spark_files"], report["latest_checkpoint"]["recovers_from"]
    if not files:
        notes.append("no Spark checkpoint file: there is nothing for Spark to recover from")
    elif report["verified"] and recovers is None:
        notes.append("no checkpoint file is readable: a run here cannot recover (exit code 3)")
    unreadable = [f["name"] for f in files if f["readable"] is False]
    if unreadable and recovers:
        notes.append(f"unreadable: {', '.join(unreadable)}; Spark falls back to {recovers}")
    stale = [f["name"] for f in files if f["missing_rdds"]]
    usable = [f for f in files if f["readable"] and f["missing_rdds"] == []]
    if recovers in stale:
        notes.append(
            f"{recovers}, the newest readable file, references RDD checkpoints that are gone: "
            "Spark cannot restore the state from it"
        )
    elif stale:
        notes.append(
            f"{len(usable)} of {len(files)} files can restore the state; the other "
            f"{len(stale)} reference RDD checkpoints Spark has since deleted (it keeps only "
            "those the newest checkpoint needs)"
        )
    if report["set_aside_files"]:
        notes.append(
            f"set aside by an earlier start as unusable: {', '.join(report['set_aside_files'])}"
        )
    if report["metadata"]["status"] == "none":
        notes.append("metadata: none (written before streaming_app 0.2 or by other code)")
    offsets = report["offsets"]
    if offsets and len(offsets["uncommitted"]) > 1:
        notes.append(
            f"{len(offsets['uncommitted'])} planned batches are not committed: a restart "
            "re-runs them exactly, from the offset log"
        )
    return notes
