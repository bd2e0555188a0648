"""`checkpoint clean`: find what no recovery of a checkpoint can need, and remove it on request.

What goes: RDD checkpoint folders that no `checkpoint-*` file references (except the
newest `<uuid>` folder, and anything changed after the newest checkpoint file, which a
running app may be about to reference), offset/commit log entries older than the prune
horizon, input-files entries the oldest kept snapshot includes, snapshots beyond
`snapshot_keep`, and temp files left by a crash (older than MIN_TEMP_AGE_MS). Never the
checkpoint files, `metadata`, `kafka-tick` or the receiver's logs. If a checkpoint file
cannot be read, every RDD folder stays: the file may become readable again (say, with
the code version that wrote it) and then need them.

`checkpoint clean --json` prints CleanPlan.to_json() plus `applied` and `failed`:
`checkpoint_dir`, `removals` (`path`, `kind`, `size_bytes`, `reason`), `kept` (sentences
on what stays and why), `total_bytes`.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from streaming_app.common.batch_log import BatchLog
from streaming_app.common.fs import join
from streaming_app.recovery.metadata import CheckpointMetadata
from streaming_app.recovery.snapshots import TEMP_PREFIX, snapshot_batch, snapshot_name, to_prune
from streaming_app.recovery.spark_checkpoint import (
    CheckpointFs,
    CheckpointProbe,
    FileCheck,
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
    prune_horizon,
)
from streaming_app.tools.checkpoint_inspect import (
    ensure_checkpoint_dir,
    read_metadata_or_none,
    snapshot_dir_of,
)

log = logging.getLogger(__name__)

# Younger temp files may belong to an app running right now.
MIN_TEMP_AGE_MS = 10 * 60 * 1000
REPLACED_PREFIX = "_replaced-"  # HadoopFs.publish_dir's aside copy
# fs.temp_path (`.name.<hex>.tmp`, with Hadoop's `.crc`), LocalFs.write_atomic (mkstemp:
# `.name.<8 chars>`), Spark's checkpoint writer (`temp`).
_TEMP = re.compile(r"^\..+\.tmp(\.crc)?$|^\.(metadata|[0-9]+)\.[a-z0-9_]{8}$|^\.?temp(\.crc)?$")
_CHECKSUM = re.compile(r"^\.(.+)\.crc$")
_LOG_DIRS = (OFFSETS_DIR, COMMITS_DIR, INPUT_FILES_DIR)


@dataclass(frozen=True)
class Removal:
    """One thing to remove: a path plus its Hadoop checksum side files, if any."""

    paths: tuple[str, ...]
    kind: str  # rdd-folder, rdd, offsets, commits, input-files, snapshot, temp
    size_bytes: int
    reason: str


@dataclass
class CleanPlan:
    """What `clean` removes (or would), and what it keeps that a reader might expect gone."""

    checkpoint_dir: str
    removals: list[Removal] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """Bytes the removals free."""
        return sum(r.size_bytes for r in self.removals)

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON values."""
        return {
            "checkpoint_dir": self.checkpoint_dir,
            "removals": [
                {"path": r.paths[0], "kind": r.kind, "size_bytes": r.size_bytes, "reason": r.reason}
                for r in self.removals
            ],
            "kept": self.kept,
            "total_bytes": self.total_bytes,
        }


def plan_clean(
    fs: CheckpointFs, checkpoint_dir: str, probe: CheckpointProbe, now_ms: int | None = None
) -> CleanPlan:
    """What can go from a checkpoint directory; removes nothing. ConfigError if not one."""
    ensure_checkpoint_dir(fs, checkpoint_dir)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    plan = CleanPlan(checkpoint_dir)
    metadata = read_metadata_or_none(fs, checkpoint_dir)
    files = spark_files(fs, checkpoint_dir)
    checks = [probe.check(join(checkpoint_dir, f.name)) for f in files]
    _plan_rdds(fs, checkpoint_dir, files, checks, probe.verifies, plan)
    _plan_logs(fs, checkpoint_dir, files, _intervals(metadata, checks), plan)
    kept_snapshots = _plan_snapshots(fs, checkpoint_dir, metadata, now, plan)
    _plan_input_files(fs, checkpoint_dir, kept_snapshots, plan)
    for directory in (checkpoint_dir, *(join(checkpoint_dir, d) for d in _LOG_DIRS)):
        plan_temps(fs, directory, now, plan)
    return plan


def apply_plan(fs: CheckpointFs, plan: CleanPlan) -> list[str]:
    """Remove everything in the plan; returns the paths that could not be removed."""
    failed = []
    for removal in plan.removals:
        for path in removal.paths:
            try:
                fs.delete(path)
            except OSError as exc:
                log.warning("could not remove %s: %s", path, exc)
            if fs.exists(path):
                failed.append(path)
            else:
                log.debug("removed %s", path)
    return failed


def _with_checksum(fs: CheckpointFs, path: str) -> tuple[str, ...]:
    head, _, name = path.rpartition("/")
    checksum = f"{head}/.{name}.crc"
    return (path, checksum) if fs.exists(checksum) else (path,)


def _removal(fs: CheckpointFs, path: str, kind: str, reason: str) -> Removal:
    paths = _with_checksum(fs, path)
    return Removal(paths, kind, sum(fs.size(p) for p in paths), reason)


def _plan_rdds(
    fs: CheckpointFs,
    checkpoint_dir: str,
    files: list[SparkFile],
    checks: list[FileCheck],
    verified: bool,
    plan: CleanPlan,
) -> None:
    folders = rdd_folders(fs, checkpoint_dir)
    if not folders:
        return
    unreadable = [
        f.name for f, c in zip(files, checks, strict=True) if not c.readable or c.rdd_refs is None
    ]
    if not verified:
        plan.kept.append("RDD folders: all kept, the checkpoint files were not read (--no-verify)")
        return
    if unreadable:
        plan.kept.append(
            f"RDD folders: all kept, because {', '.join(unreadable)} cannot be read; it may "
            "become readable again (e.g. with the code that wrote it) and then need them"
        )
        return
    referenced = frozenset().union(*(c.rdd_refs or frozenset() for c in checks))
    newest = newest_rdd_folder(folders)
    settled = max((f.mtime_ms for f in files), default=None)
    for folder in folders:
        path = join(checkpoint_dir, folder.name)
        if folder.name == newest:
            plan.kept.append(f"{folder.name}/: the newest RDD folder (the latest run's)")
            continue
        if settled is not None and folder.mtime_ms > settled:
            plan.kept.append(
                f"{folder.name}/: changed after the newest checkpoint file was written (a "
                "running app may be about to reference it)"
            )
            continue
        needed = [r for r in folder.rdds if f"{folder.name}/{r.name}" in referenced]
        if not needed:
            reason = "no checkpoint file references its RDD checkpoints"
            plan.removals.append(Removal((path,), "rdd-folder", folder.size, reason))
            continue
        for rdd in folder.rdds:
            if rdd not in needed:
                reason = "no checkpoint file references it"
                plan.removals.append(Removal((join(path, rdd.name),), "rdd", rdd.size, reason))


def _intervals(
    metadata: CheckpointMetadata | None, checks: list[FileCheck]
) -> tuple[int, int, int] | None:
    """Batch and state checkpoint intervals and the window: metadata, else a readable file."""
    if metadata is not None:
        return metadata.batch_ms, metadata.checkpoint_ms, metadata.settings.get("window") or 0
    for check in checks:
        if check.batch_ms and check.state_checkpoint_ms:
            # No metadata: written before there were windows (metadata came first).
            return check.batch_ms, check.state_checkpoint_ms, 0
    return None


def _doomed(entries: BatchLog, before_ms: int) -> list[int]:
    """What BatchLog.prune(before_ms) would delete: older entries, never the newest."""
    return [t for t in entries.batch_times()[:-1] if t < before_ms]


def _plan_logs(
    fs: CheckpointFs,
    checkpoint_dir: str,
    files: list[SparkFile],
    intervals: tuple[int, int, int] | None,
    plan: CleanPlan,
) -> None:
    logs = (OffsetLog(fs, checkpoint_dir), CommitLog(fs, checkpoint_dir))
    newest = max((t for entries in logs for t in entries.batch_times()[-1:]), default=None)
    if newest is None:
        return
    if intervals is None:
        plan.kept.append(
            "offset and commit logs: all kept (no metadata and no readable checkpoint file "
            "tells the batch and checkpoint intervals)"
        )
        return
    horizon = prune_horizon(newest, [f.name for f in files], *intervals)
    if horizon is None:
        plan.kept.append("offset and commit logs: all kept (no Spark checkpoint file yet)")
        return
    for entries, kind in zip(logs, ("offsets", "commits"), strict=True):
        for batch_ms in _doomed(entries, horizon):
            reason = f"older than the prune horizon {horizon}: no recovery starts before it"
            plan.removals.append(_removal(fs, entries.path(batch_ms), kind, reason))


def _plan_snapshots(
    fs: CheckpointFs,
    checkpoint_dir: str,
    metadata: CheckpointMetadata | None,
    now_ms: int,
    plan: CleanPlan,
) -> list[int]:
    """Plan snapshots beyond snapshot_keep and crash-left temp dirs; returns the kept times."""
    directory = snapshot_dir_of(fs, checkpoint_dir, metadata)
    if directory is None:
        return []
    names = fs.list_names(directory)
    times = sorted(t for t in map(snapshot_batch, names) if t is not None)
    keep = metadata.settings.get("snapshot_keep") if metadata else None
    if not isinstance(keep, int) or isinstance(keep, bool) or keep <= 0:
        if times:
            why = "is not recorded" if keep is None else f"is {keep!r}"
            plan.kept.append(f"snapshots: all {len(times)} kept (snapshot_keep {why})")
    else:
        for name in to_prune(names, keep, 0):
            reason = f"beyond the newest {keep} (snapshot_keep)"
            plan.removals.append(_removal(fs, join(directory, name), "snapshot", reason))
        times = times[-keep:]
    for name in names:
        path = join(directory, name)
        if name.startswith(TEMP_PREFIX) or (
            name.startswith(REPLACED_PREFIX)
            and fs.exists(join(directory, name[len(REPLACED_PREFIX) :]))
        ):
            _add_temp(fs, path, now_ms, plan)
    return times


def _plan_input_files(
    fs: CheckpointFs, checkpoint_dir: str, kept_snapshots: list[int], plan: CleanPlan
) -> None:
    entries = InputFilesLog(fs, checkpoint_dir)
    if not entries.batch_times():
        return
    if not kept_snapshots:
        plan.kept.append("input-files log: all kept (no snapshot includes its files yet)")
        return
    oldest = kept_snapshots[0]
    for batch_ms in _doomed(entries, oldest + 1):
        reason = f"included in the oldest kept snapshot {snapshot_name(oldest)}"
        plan.removals.append(_removal(fs, entries.path(batch_ms), "input-files", reason))


def plan_temps(fs: CheckpointFs, directory: str, now_ms: int, plan: CleanPlan) -> None:
    names = set(fs.list_names(directory))
    for name in sorted(names):
        checksum = _CHECKSUM.match(name)
        orphan = checksum is not None and checksum[1] not in names
        if _TEMP.match(name):
            _add_temp(fs, join(directory, name), now_ms, plan)
        elif orphan:
            reason = "Hadoop checksum of a file that is gone"
            _add_temp(fs, join(directory, name), now_ms, plan, reason)


def _add_temp(
    fs: CheckpointFs,
    path: str,
    now_ms: int,
    plan: CleanPlan,
    reason: str = "left by a crash mid-write",
) -> None:
    if now_ms - fs.mtime_ms(path) < MIN_TEMP_AGE_MS:
        minutes = MIN_TEMP_AGE_MS // 60000
        plan.kept.append(f"{path}: a temp file younger than {minutes} min (may be in use)")
        return
    plan.removals.append(Removal((path,), "temp", fs.size(path), reason))
