"""The checkpoint compatibility guard: decide, before Spark reads anything, how to start.

A checkpoint is recovered only if its `metadata` record says it was written by this
version of the app, Spark, cloudpickle and Python (minor), with the same graph-shaping
settings. Otherwise `on_incompatible_checkpoint` decides: `fail` (exit 3, saying what
differs and what to do) or `restore-from-snapshot` (move the checkpoint aside and start a
new one seeded from the newest snapshot).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from streaming_app.common.checkpoint_files import checkpoint_file_times
from streaming_app.common.fs import FileSystem
from streaming_app.common.path_fs import filesystem_for
from streaming_app.errors import CheckpointError, ConfigError
from streaming_app.recovery.metadata import (
    LATER_GRAPH_SETTINGS,
    STRUCTURED_METADATA_FILE,
    CheckpointMetadata,
    differences,
    metadata_json,
    read_metadata,
)
from streaming_app.recovery.restore import Seed
from streaming_app.recovery.snapshots import find_snapshot
from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)

RESTORE = "restore-from-snapshot"


@dataclass(frozen=True)
class StartPlan:
    """How to start: recover the checkpoint, or create a context (seeded or empty)."""

    recover: bool
    seed: Seed | None = None


def state_checkpointed(fs: FileSystem, checkpoint_dir: str) -> bool:
    """Whether Spark has saved the state RDD at least once (an `<uuid>/rdd-*` folder)."""
    for name in fs.list_names(checkpoint_dir):
        if len(name) == 36 and name.count("-") == 4:
            subdir = checkpoint_dir.rstrip("/") + "/" + name
            if any(n.startswith("rdd-") for n in fs.list_names(subdir)):
                return True
    return False


def plan_start(fs: FileSystem, config: AppConfig, current: CheckpointMetadata) -> StartPlan:
    """Decide how this run starts; raises CheckpointError or ConfigError when it cannot."""
    ckpt = config.checkpoint_dir
    if structured_checkpoint(fs, ckpt):
        raise CheckpointError(
            f"checkpoint_dir {ckpt} holds a Structured Streaming query's checkpoint; run it "
            "with --engine structured, or give this engine another checkpoint_dir"
        )
    if not has_checkpoint(fs, ckpt):
        if config.restore_from_snapshot is not None:
            return StartPlan(recover=False, seed=seed_at(config.restore_from_snapshot))
        return StartPlan(recover=False, seed=_unfinished_seed(fs, ckpt))
    try:
        recorded = read_metadata(fs, ckpt)
        problems = (
            differences(recorded, current)
            if recorded is not None
            else [
                "it has no metadata record (written by streaming_app before 0.2.0 or by other code)"
            ]
        )
    except CheckpointError as exc:
        recorded, problems = None, [f"its metadata record is unreadable: {exc}"]
    if config.restore_from_snapshot is not None:
        if recorded is not None and recorded.seeded_from:
            # A supervisor restarting the same command line: the restore happened (the
            # snapshot may be gone by now, and is not looked up again).
            log.info(
                "the checkpoint was already seeded from %s; recovering it (restore_from_snapshot "
                "%s applies to a new checkpoint only)",
                recorded.seeded_from,
                config.restore_from_snapshot,
            )
        else:
            raise ConfigError(
                f"restore_from_snapshot: checkpoint_dir {ckpt} already holds a checkpoint; "
                "restore into a new, empty checkpoint directory (or move this one aside)"
            )
    if recorded is not None and recorded.seeded_from and not state_checkpointed(fs, ckpt):
        # Spark cannot recover a seeded context before its first state checkpoint (the
        # initial RDD does not survive the checkpoint): seed it again, losing nothing.
        log.warning(
            "the checkpoint was seeded from %s and stopped before its first state checkpoint; "
            "starting again from that snapshot",
            recorded.seeded_from,
        )
        return reseed(fs, ckpt, recorded.seeded_from)
    if problems:
        return incompatible(fs, config, recorded, problems)
    assert recorded is not None  # problems otherwise
    kept = recorded.settings.get("state_buckets", LATER_GRAPH_SETTINGS["state_buckets"])
    if kept != config.state_buckets:
        log.info(
            "the checkpoint keeps its totals %s; state_buckets=%d applies to new checkpoints "
            "(restore from a snapshot into a new one to change it)",
            f"in {kept} buckets" if kept else "one state record per key",
            config.state_buckets,
        )
    return StartPlan(recover=True)


def incompatible(
    fs: FileSystem, config: AppConfig, recorded: CheckpointMetadata | None, problems: list[str]
) -> StartPlan:
    """Apply on_incompatible_checkpoint to a checkpoint this run cannot use."""
    ckpt = config.checkpoint_dir
    what = "; ".join(problems)
    snapshots = _snapshot_dir(config, recorded)
    if config.on_incompatible_checkpoint != RESTORE:
        raise CheckpointError(
            f"checkpoint {ckpt} cannot be used by this run: {what}. To carry the totals over, "
            f"restart with --on-incompatible-checkpoint {RESTORE} (seeds a new checkpoint "
            f"from the newest snapshot in {snapshots}); to keep this checkpoint, run the "
            "version and settings that wrote it; to start from zero, move the directory "
            "aside. See docs/upgrades.md"
        )
    try:
        path, manifest = find_snapshot(filesystem_for(snapshots), snapshots)
    except ConfigError:
        raise CheckpointError(
            f"checkpoint {ckpt} cannot be used by this run ({what}) and there is no snapshot "
            f"in {snapshots} to restore from. Run the version and settings that wrote it, or "
            "move the directory aside to start from zero"
        ) from None
    log.warning("checkpoint %s cannot be used by this run: %s", ckpt, what)
    moved = move_aside(fs, ckpt, "incompatible")
    if path.startswith(ckpt.rstrip("/") + "/"):
        path = moved + path[len(ckpt.rstrip("/")) :]
    log.warning("restoring from snapshot %s (batch_time_ms=%d)", path, manifest.batch_time_ms)
    return StartPlan(recover=False, seed=Seed(path, manifest))


def move_aside(fs: FileSystem, checkpoint_dir: str, why: str) -> str:
    """Rename a checkpoint directory to `<dir>.<why>-<epoch ms>`; returns the new path."""
    target = f"{checkpoint_dir.rstrip('/')}.{why}-{int(time.time() * 1000)}"
    try:
        fs.rename(checkpoint_dir, target)
    except OSError as exc:
        raise CheckpointError(f"could not move {checkpoint_dir} aside to {target}: {exc}") from None
    log.warning("moved checkpoint %s aside to %s", checkpoint_dir, target)
    return target


def _snapshot_dir(config: AppConfig, recorded: CheckpointMetadata | None) -> str:
    if recorded is not None and isinstance(recorded.settings.get("snapshot_dir"), str):
        return str(recorded.settings["snapshot_dir"])
    return config.snapshots_at


def structured_checkpoint(fs: FileSystem, checkpoint_dir: str) -> bool:
    """Whether a Structured Streaming query keeps its checkpoint there: the `metadata` file
    a query writes when it starts (`{"id": ...}`), which has the name of this engine's
    record and would be overwritten by it, or the structured engine's own record (written
    just before the query starts). (Not its `offsets/` and `commits/`: this engine's Kafka
    source keeps logs of those names too.)"""
    if STRUCTURED_METADATA_FILE in fs.list_names(checkpoint_dir):
        return True
    found = metadata_json(fs, checkpoint_dir)  # None for this engine's unreadable record
    return isinstance(found, dict) and "id" in found and "format" not in found


def has_checkpoint(fs: FileSystem, checkpoint_dir: str) -> bool:
    """Whether Spark has written a checkpoint file there."""
    return bool(checkpoint_file_times(fs.list_names(checkpoint_dir)))


def reseed(fs: FileSystem, checkpoint_dir: str, snapshot: str) -> StartPlan:
    """Move a seeded checkpoint that Spark cannot recover aside; seed again from its snapshot."""
    seed = seed_at(snapshot)
    move_aside(fs, checkpoint_dir, "unfinished")
    return StartPlan(recover=False, seed=seed)


def seed_at(path: str) -> Seed:
    """The snapshot at `path`; for an old checkpoint, also where its metadata kept them."""
    fs = filesystem_for(path)
    try:
        found, manifest = find_snapshot(fs, path)
    except ConfigError:
        try:
            recorded = read_metadata(fs, path)
        except CheckpointError:
            recorded = None
        elsewhere = recorded.settings.get("snapshot_dir") if recorded else None
        if not isinstance(elsewhere, str) or elsewhere.rstrip("/") == path.rstrip("/"):
            raise
        found, manifest = find_snapshot(filesystem_for(elsewhere), elsewhere)
    return Seed(found, manifest)


def _unfinished_seed(fs: FileSystem, checkpoint_dir: str) -> Seed | None:
    """The snapshot of a seeded run that never wrote a checkpoint: seed again from it."""
    try:
        recorded = read_metadata(fs, checkpoint_dir)
    except CheckpointError:
        return None
    if recorded is None or not recorded.seeded_from:
        return None
    log.warning(
        "the previous run was seeded from %s and stopped before its first checkpoint; "
        "seeding again from it",
        recorded.seeded_from,
    )
    return seed_at(recorded.seeded_from)
