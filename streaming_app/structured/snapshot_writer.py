"""Snapshots of the structured engine: a committed micro-batch's totals, in the DStream format.

Driver side, in foreachBatch, after the sinks: micro-batch N writes the snapshot of
micro-batch N-1 when one is due (Spark's state data source reads committed micro-batches
only, and N-1 is committed once N runs). The executors read the state (the `statestore`
data source, one task per state partition: totals.py) and write one part file each; the driver gets
the count and the sum, renames the directory into place and writes the manifest last
(recovery/snapshot_writer.py: the same format, retention and replay rules as the DStream
engine's), with the position the state includes, from the offsets log: the Kafka end
offsets of N-1, or the names of the input files the file source's log has up to N-1.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import FileSystem, join
from streaming_app.recovery.snapshot_writer import (
    SnapshotSettings,
    needless,
    new_manifest,
    publish,
    warn_failed,
)
from streaming_app.recovery.snapshots import (
    TEMP_PREFIX,
    format_line,
    snapshot_name,
    snapshot_times,
)
from streaming_app.settings.schema import AppConfig
from streaming_app.sources.files_log import visible_names
from streaming_app.structured.kafka_offsets import from_json
from streaming_app.structured.query_log import (
    OFFSETS,
    batch_timestamp,
    parse_offsets_entry,
    query_id,
)
from streaming_app.structured.source_log import files_up_to, log_offset
from streaming_app.structured.totals import exact_pair, state_totals

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
ENGINE = "structured"


def is_due(batch_ms: int, previous_ms: int | None, interval_ms: int) -> bool:
    """A micro-batch is due when it is the first, or the first after a multiple of the interval.

    Both times come from the offsets log, so a replay decides the same way; idle
    intervals have no micro-batch, so a snapshot falls on the first one after them.
    """
    return previous_ms is None or batch_ms // interval_ms > previous_ms // interval_ms


@dataclass
class SnapshotsAfterSinks:
    """The foreachBatch function: the sinks, then the snapshot of the micro-batch before."""

    sinks: Callable[[DataFrame, int], None]
    config: AppConfig

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Write micro-batch `batch_id` to the sinks; snapshot `batch_id - 1` if due."""
        self.sinks(batch, batch_id)
        if batch_id > 0:
            write_snapshot(batch.sparkSession, self.config, batch_id - 1)


def with_snapshots(sinks: Callable[[DataFrame, int], None], config: AppConfig) -> Any:
    """The foreachBatch function: `sinks`, with snapshots unless snapshot_keep is 0."""
    return SnapshotsAfterSinks(sinks, config) if config.snapshot_keep > 0 else sinks


def write_snapshot(spark: SparkSession, config: AppConfig, batch_id: int) -> None:
    """Snapshot committed micro-batch `batch_id` if due; a failure is a warning, not a crash."""
    try:
        path = _write(spark, config, batch_id)
    except Exception as exc:  # the checkpoint still protects the state; retried next time
        warn_failed(f"batch_id={batch_id}", config.snapshots_at, exc, config.snapshot_ms)
        return
    if path is not None:
        log.info("wrote state snapshot batch_id=%d path=%s", batch_id, path)


def _write(spark: SparkSession, config: AppConfig, batch_id: int) -> str | None:
    from streaming_app.common.hadoop_fs import HadoopFs

    sc = spark.sparkContext
    checkpoint = config.checkpoint_dir
    log_fs = HadoopFs(sc, checkpoint)
    batch_ms = batch_timestamp(log_fs, checkpoint, batch_id)
    previous_ms = batch_timestamp(log_fs, checkpoint, batch_id - 1)
    if batch_ms is None or not is_due(batch_ms, previous_ms, config.snapshot_ms):
        return None
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
    pairs = state_pairs(spark, checkpoint, batch_id).cache()
    try:
        # The executors write the state's partitions; the driver gets the figures only.
        pairs.map(format_line).saveAsTextFile(temp)
        words = pairs.count()
        total: Any = pairs.values().sum() if words else 0
    finally:
        pairs.unpersist()
    manifest = new_manifest(settings, batch_ms, words, total, position, ENGINE)
    publish(fs, settings, temp, final, manifest)
    return final


def state_pairs(spark: SparkSession, checkpoint: str, batch_id: int) -> RDD[Any]:
    """(key, total) of every key after committed micro-batch `batch_id`, read on the executors."""
    return state_totals(spark, checkpoint, batch_id).rdd.map(exact_pair)


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
