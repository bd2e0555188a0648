"""The structured engine's checkpoint guard: a record of what the checkpoint was made with.

Driver side, before the query starts (no Spark needed: a FileSystem). Next to Spark's own
files the checkpoint gets `streaming_app_metadata.json` (recovery/metadata.py's record,
`engine: structured`): the app and Spark versions and the settings that must not change
across restarts on this engine. Spark rebuilds the query from today's settings on every
start and takes only the source position and the state from the checkpoint, so a change
of the job, of the source's identity or of how keys are read would mix new input with
totals made another way. Such a restart exits 3 naming each change and what to do; the
checkpoint is left as it is. Everything else may change (sinks, trigger interval, rate
cap, brokers, credentials). The state partitions are fixed by Spark at the first run: an
explicit `--spark-conf spark.sql.shuffle.partitions` that differs is refused rather than
silently ignored.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any

from streaming_app.common.fs import FileSystem, is_local_path, join
from streaming_app.errors import CheckpointError
from streaming_app.recovery.guard import RESTORE, incompatible
from streaming_app.recovery.metadata import (
    STRUCTURED_METADATA_FILE,
    CheckpointMetadata,
    fingerprint,
    minor,
    read_metadata,
    setting_changes,
    write_metadata,
)
from streaming_app.recovery.restore import Seed
from streaming_app.settings.schema import AppConfig
from streaming_app.structured.query_log import (
    OFFSETS,
    batch_ids,
    parse_offsets_entry,
)
from streaming_app.structured.state_layout import state_layout

log = logging.getLogger(__name__)

ENGINE = "structured"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# What identifies each source's input: its position in the checkpoint is about it.
SOURCE_IDENTITY: dict[str, tuple[str, ...]] = {
    "files": ("input_dir",),
    "kafka": ("topics",),
    "socket": (),  # nothing replayable is kept: host and port may change
}
# How each job turns input into keys and values.
JOB_SETTINGS: dict[str, tuple[str, ...]] = {
    "wordcount": ("token_pattern", "lowercase"),
    "keyed-sum": ("csv_fields", "key_field", "value_field", "csv_delimiter", "csv_header"),
}
GUARDED = (
    "job",
    "source",
    *(key for keys in SOURCE_IDENTITY.values() for key in keys),
    *(key for keys in JOB_SETTINGS.values() for key in keys),
    "state_partitions",
    "state_layout",
)
ALWAYS_COMPARED = ("job", "source", "state_layout")
# Records written before the layout was recorded (up to 3660695): a value state per word.
# 9827bb2 (0.4.0) recorded map-per-bucket/1024: a map state per bucket of transformWithState.
UNSET = {"state_layout": "value-per-key"}
LABELS = {
    "state_partitions": f"{SHUFFLE_PARTITIONS} (the state partitions)",
    "state_layout": "state layout",
}
WHAT_TO_DO = (
    "To keep this checkpoint, run with the settings that wrote it; to carry the totals "
    f"over, restart with --on-incompatible-checkpoint {RESTORE} (a new query seeded from "
    "the newest snapshot, as --restore-from-snapshot with a new checkpoint_dir would); to "
    "start from zero, give a new checkpoint_dir (and output_dir), or move them aside. See "
    "docs/structured.md"
)


def explicit_partitions(config: AppConfig) -> int | None:
    """The state partitions `--spark-conf spark.sql.shuffle.partitions` asks for, if it does."""
    given = dict(config.spark_conf).get(SHUFFLE_PARTITIONS)
    try:
        return None if given is None else int(given)
    except ValueError:
        return None  # Spark refuses it when the session starts


def guarded_settings(config: AppConfig, state_partitions: int | None) -> dict[str, Any]:
    """The settings of a run that must not change across restarts, as JSON values."""
    settings: dict[str, Any] = {"job": config.job, "source": config.source}
    for key in (*SOURCE_IDENTITY.get(config.source, ()), *JOB_SETTINGS.get(config.job, ())):
        value = getattr(config, key)
        if key == "input_dir" and value and is_local_path(value):
            value = os.path.abspath(value)  # the same directory from another working dir
        elif key == "topics":
            value = sorted(value)
        elif isinstance(value, tuple):
            value = list(value)
        settings[key] = value
    settings["state_partitions"] = state_partitions
    settings["state_layout"] = state_layout(
        config.job, config.sum_scale, config.window_ms, config.slide_ms
    )
    return settings


def structured_record(config: AppConfig, state_partitions: int | None) -> CheckpointMetadata:
    """The record of a structured checkpoint made (or first guarded) now."""
    settings = guarded_settings(config, state_partitions)
    return replace(
        CheckpointMetadata.for_config(config),
        engine=ENGINE,
        settings=settings,
        settings_fingerprint=fingerprint(settings),
    )


def changes(recorded: CheckpointMetadata, current: CheckpointMetadata) -> list[str]:
    """Why a structured checkpoint recorded as `recorded` cannot be used by `current`.

    Settings of another job or source than the recorded one are not compared (the job or
    source change is named instead). Spark's version counts to the minor: its state and
    log formats may change between minor versions, not within one.
    """
    found = []
    if recorded.engine != ENGINE:
        found.append(f"engine {recorded.engine} -> {ENGINE}")
    if minor(recorded.spark_version) != minor(current.spark_version):
        found.append(f"spark version {recorded.spark_version} -> {current.spark_version}")
    was, now = recorded.settings, current.settings
    keys = [k for k in GUARDED if k in ALWAYS_COMPARED or (k in was and k in now)]
    return found + setting_changes(was, now, keys, unset=UNSET, labels=LABELS)


def kept_conf(fs: FileSystem, checkpoint_dir: str) -> dict[str, str]:
    """The Spark settings the offsets log keeps from the first run (its newest readable entry)."""
    directory = join(checkpoint_dir, OFFSETS)
    for batch_id in reversed(batch_ids(fs, directory)):
        try:
            entry = parse_offsets_entry(fs.read_bytes(join(directory, str(batch_id))))
            conf = entry.metadata.get("conf")
            if isinstance(conf, dict):
                return {str(k): str(v) for k, v in conf.items()}
        except (OSError, ValueError, UnicodeDecodeError):
            continue
    return {}


def kept_partitions(fs: FileSystem, checkpoint_dir: str) -> int | None:
    """The state partitions Spark keeps in the offsets log (its newest readable entry)."""
    try:
        return int(kept_conf(fs, checkpoint_dir)[SHUFFLE_PARTITIONS])
    except (KeyError, ValueError):
        return None


def unapplied_settings(kept: dict[str, str], config: AppConfig) -> list[str]:
    """A line for each Spark setting of the user's that the query's checkpoint overrides.

    Spark takes these from the offsets log, not from the session, once a query has run.
    """
    return [
        f"Spark setting {key}={value} is not applied: the query's checkpoint keeps "
        f"{key}={kept[key]} from its first run (Spark reads it from the offsets log)"
        for key, value in config.spark_conf
        if key in kept and kept[key] != value
    ]


def guard_checkpoint(fs: FileSystem, config: AppConfig, session_partitions: int) -> Seed | None:
    """Check the checkpoint's record against this run; write it for a new checkpoint.

    A checkpoint without a planned micro-batch gets this run's record whatever it held.
    A checkpoint this run cannot use is refused, or, with `on_incompatible_checkpoint =
    restore-from-snapshot`, moved aside (`<dir>.incompatible-<ms>`, as with DStreams):
    the snapshot to seed a new query from is returned (None otherwise).

    session_partitions: the state partitions the session would give a new checkpoint.
    Raises CheckpointError (exit 3), writing nothing, if the run cannot use the checkpoint
    (and, under restore-from-snapshot, has no snapshot to restore from).
    """
    ckpt = config.checkpoint_dir
    if not batch_ids(fs, join(ckpt, OFFSETS)):
        # No micro-batch planned yet: nothing in the checkpoint depends on the settings (a
        # first start stopped early, with a mistyped input_dir say). Record today's.
        write_metadata(
            fs, ckpt, structured_record(config, session_partitions), STRUCTURED_METADATA_FILE
        )
        return None
    try:
        recorded = read_metadata(fs, ckpt, STRUCTURED_METADATA_FILE)
    except CheckpointError as exc:
        raise CheckpointError(
            f"{exc}; remove that file to record this run's settings instead, or move the "
            "checkpoint aside to start from zero"
        ) from None
    if recorded is None:  # written before the guard: today's settings are all there is
        log.warning(
            "checkpoint %s has no streaming_app record (written before the guard): "
            "recording this run's settings",
            ckpt,
        )
        recorded = structured_record(config, kept_partitions(fs, ckpt) or session_partitions)
        write_metadata(fs, ckpt, recorded, STRUCTURED_METADATA_FILE)
    kept = recorded.settings.get("state_partitions")
    asked = explicit_partitions(config)
    current = structured_record(config, asked if asked is not None else kept)
    found = changes(recorded, current)
    if found and config.on_incompatible_checkpoint == RESTORE:
        # Moved aside; the query starts anew from the newest snapshot (or exit 3 if none).
        return incompatible(fs, config, recorded, found).seed
    if found:
        raise CheckpointError(
            f"checkpoint {ckpt} cannot be used by this run: {'; '.join(found)}. {WHAT_TO_DO}"
        )
    for line in unapplied_settings(kept_conf(fs, ckpt), config):
        log.warning("%s", line)
    return None
