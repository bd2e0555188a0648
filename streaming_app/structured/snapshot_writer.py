"""Snapshots of the structured engine: a micro-batch's totals, in the DStream format.

Driver side, in foreachBatch (sinks.py), after the sinks: when one is due, micro-batch N
writes the snapshot of N, from every total after it (totals.py `EveryTotal`: the committed
state of N-1 read with Spark's state data source, N's changes laid over it), the same
read a files base of N uses. A replay of N computes the same totals and finds its
snapshot written. The executors write one part file per state partition, the lines made
by Spark itself (totals.py `snapshot_lines`: no total passes through Python); the driver
gets the count and the sum, renames the directory into place and writes the manifest last
(recovery/snapshot_writer.py: the same format, retention and replay rules as the DStream
engine's), with the position the totals include, from the offsets log: the Kafka end
offsets of N, or the names of the input files the file source's log has up to N.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import FileSystem, join
from streaming_app.common.prometheus import timed
from streaming_app.recovery.snapshot_writer import (
    SnapshotSettings,
    needless,
    new_manifest,
    publish,
    warn_failed,
)
from streaming_app.recovery.snapshots import (
    TEMP_PREFIX,
    snapshot_name,
    snapshot_times,
)
from streaming_app.settings.schema import AppConfig
from streaming_app.sources.files_log import visible_names
from streaming_app.structured.kafka_offsets import from_json
from streaming_app.structured.query_log import (
    OFFSETS,
    parse_offsets_entry,
    query_id,
)
from streaming_app.structured.source_log import files_up_to, log_offset
from streaming_app.structured.totals import count_and_sum, snapshot_lines

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
ENGINE = "structured"


def is_due(batch_ms: int, previous_ms: int | None, interval_ms: int) -> bool:
    """A micro-batch is due when it is the first, or the first after a multiple of the interval.

    Both times come from the offsets log, so a replay decides the same way; idle
    intervals have no micro-batch, so a snapshot falls on the first one after them.
    """
    return previous_ms is None or batch_ms // interval_ms > previous_ms // interval_ms


def snapshot_due(config: AppConfig, batch_ms: int, previous_ms: int | None) -> bool:
    """Whether the micro-batch at `batch_ms` writes a snapshot (none with snapshot_keep 0)."""
    return config.snapshot_keep > 0 and is_due(batch_ms, previous_ms, config.snapshot_ms)


def write_snapshot(
    spark: SparkSession,
    config: AppConfig,
    batch_id: int,
    batch_ms: int,
    every: Callable[[], DataFrame],
) -> None:
    """Snapshot micro-batch `batch_id` (due) from `every`, every total after it, unless
    written before; a failure is a warning, not a crash (the checkpoint still protects
    the state)."""
    try:
        with timed("snapshot"):
            path = _write(spark, config, batch_id, batch_ms, every)
    except Exception as exc:  # retried at the next snapshot due
        warn_failed(f"batch_id={batch_id}", config.snapshots_at, exc, config.snapshot_ms)
        return
    if path is not None:
        log.info("wrote state snapshot batch_id=%d path=%s", batch_id, path)


def _write(
    spark: SparkSession,
    config: AppConfig,
    batch_id: int,
    batch_ms: int,
    every: Callable[[], DataFrame],
) -> str | None:
    from streaming_app.common.hadoop_fs import HadoopFs

    sc = spark.sparkContext
    checkpoint = config.checkpoint_dir
    log_fs = HadoopFs(sc, checkpoint)
    settings = SnapshotSettings(
        directory=config.snapshots_at,
        interval_ms=config.snapshot_ms,
        keep=config.snapshot_keep,
        source=config.source,
        checkpoint_dir=checkpoint,
        input_dir=config.input_dir,
        context_id=query_id(log_fs, checkpoint),
    )
    fs = HadoopFs(sc, settings.directory)
    if needless(fs, snapshot_times(fs, settings.directory), batch_ms, settings):
        return None
    position = batch_position(log_fs, config, batch_id)
    if config.source == "files":
        assert config.input_dir is not None
        present = visible_names(HadoopFs(sc, config.input_dir).list_names(config.input_dir))
        position = {"files": sorted(set(position["files"]) & set(present))}
    temp = join(settings.directory, f"{TEMP_PREFIX}{batch_ms}")
    final = join(settings.directory, snapshot_name(batch_ms))
    fs.delete(temp)  # left over from a run killed while writing this snapshot
    totals = every()
    # The executors write the totals' partitions; the driver gets the figures only.
    snapshot_lines(totals).write.text(temp)
    words, total = count_and_sum(totals)
    manifest = new_manifest(settings, batch_ms, words, total, position, ENGINE)
    publish(fs, settings, temp, final, manifest)
    return final


def batch_position(fs: FileSystem, config: AppConfig, batch_id: int) -> dict[str, Any]:
    """What the state after `batch_id` includes: Kafka end offsets, files read; {} for a socket."""
    path = join(join(config.checkpoint_dir, OFFSETS), str(batch_id))
    entry = parse_offsets_entry(fs.read_bytes(path))
    offset = entry.sources[0] if entry.sources else None
    if config.source == "kafka":
        positions = from_json(offset)
        return {"kafka": [[t, p, o] for (t, p), o in sorted(positions.items())]}
    if config.source == "files":
        return {"files": sorted(files_up_to(fs, config.checkpoint_dir, log_offset(offset)))}
    return {}
