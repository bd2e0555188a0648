"""The one factory, `create_context`: the whole DStream graph handed to getOrCreate."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from pyspark import SparkContext
from pyspark.streaming import DStream, StreamingContext

from streaming_app.common.batch_time import spark_seconds
from streaming_app.common.hadoop_fs import HadoopFs
from streaming_app.jobs.counting import (
    csv_spec,
    per_partition,
    pre_aggregated,
    reduce_functions,
    update_function,
    values_only,
)
from streaming_app.lifecycle.spark_context import spark_context
from streaming_app.recovery.metadata import CheckpointMetadata, write_metadata
from streaming_app.recovery.restore import Seed, seed_state, seeded_config
from streaming_app.recovery.snapshot_writer import (
    SnapshotSettings,
    files_in_snapshots,
    write_snapshot,
)
from streaming_app.settings.schema import AppConfig
from streaming_app.sinks.attach import attach_sinks
from streaming_app.sinks.commit import attach_commit
from streaming_app.sources.build import build_source
from streaming_app.state.buckets import batch_buckets, batch_pairs, keep_totals
from streaming_app.state.view import StateView

log = logging.getLogger(__name__)

# Spark settings the app relies on; spark-defaults.conf, --conf or --spark-conf may override.
ESSENTIAL_SPARK_CONF = {
    # SIGTERM to the JVM also finishes the batches in flight.
    "spark.streaming.stopGracefullyOnShutdown": "true",
    # The batched block-metadata log is closed before a graceful stop has allocated the
    # last received blocks, so the stop would wait out its whole timeout.
    "spark.streaming.driver.writeAheadLog.allowBatching": "false",
}


def dstream_spark_context(config: AppConfig) -> SparkContext:
    """The SparkContext of this run, with today's settings (lifecycle/spark_context.py).

    Made before getOrCreate, so a recovered context runs on it as a new one does.
    """
    defaults = dict(ESSENTIAL_SPARK_CONF)
    forced = {
        # The launcher turns progress bars on for pyspark-shell, and they would garble
        # the console sink's lines. --spark-conf can still turn them on.
        "spark.ui.showConsoleProgress": ("false", "progress bars garble the console sink"),
    }
    if config.source == "socket":
        # Received lines go to a write-ahead log in the checkpoint directory, so that
        # batches recomputed after a restart still have their input (otherwise the
        # totals would fall back to the last state checkpoint).
        forced["spark.streaming.receiver.writeAheadLog.enable"] = (
            "true",
            "the socket source's lines must survive a restart",
        )
    sc: SparkContext = spark_context(config, defaults, forced)
    return sc


def batch_counts(lines: DStream[str], config: AppConfig, partitions: int) -> tuple[Any, Any]:
    """Each batch's value per key (word counts, or the keyed-sum job's exact sums), and
    with state buckets the same values as batch_buckets (what the state is updated with).
    """
    if config.state_buckets:
        batch = batch_buckets(per_partition(lines, config), config.state_buckets, partitions)
        pairs = batch_pairs(batch, reduce_functions(config)[0])
    else:
        batch = None
        pairs = pre_aggregated(lines, config, partitions)
    if config.job == "keyed-sum":
        from streaming_app.jobs.keyed import report_bad_rows

        spec = csv_spec(config)
        # Bad rows travel as one (None, BadRows) pair, which values_only drops.
        pairs.foreachRDD(lambda t, rdd: report_bad_rows(t, rdd, spec))
    return values_only(pairs, config), batch


def create_context(config: AppConfig, seed: Seed | None = None) -> StreamingContext:
    """Build a new StreamingContext with source, word counts, running totals and sinks.

    Only called when there is no checkpoint: on recovery Spark rebuilds this graph
    from the checkpoint, with the settings captured here at creation time. With a
    seed, the totals start from a snapshot and the source resumes at its position.
    """
    if seed is not None:
        config = seeded_config(config, seed)
    log.info(
        "Creating new context: source=%s batch_interval=%gs checkpoint_interval=%gs "
        "checkpoint_dir=%s%s",
        config.source,
        config.batch_interval,
        config.checkpoint_ms / 1000,
        config.checkpoint_dir,
        f" seeded from snapshot {seed.path}" if seed else "",
    )
    sc = dstream_spark_context(config)
    ssc = StreamingContext(sc, spark_seconds(config.batch_ms))  # type: ignore[arg-type]
    ssc.checkpoint(config.checkpoint_dir)
    metadata = CheckpointMetadata.for_config(
        config,
        seeded_from=seed.path if seed else None,
        seeded_batch_ms=seed.manifest.batch_time_ms if seed else None,
    )
    # Written before Spark's first checkpoint file, so every checkpoint has its record.
    write_metadata(HadoopFs(sc, config.checkpoint_dir), config.checkpoint_dir, metadata)

    initial, seeded_files = seed_state(sc, config, seed) if seed else (None, frozenset[str]())
    # The snapshot writer prunes the files source's log of what a snapshot includes.
    in_snapshots = (
        partial(files_in_snapshots, config.snapshots_at, metadata.app_id)
        if config.snapshot_keep
        else None
    )
    lines = build_source(ssc, config, seeded_files, in_snapshots)
    # As many partitions as updateStateByKey and reduceByKey would take by default.
    partitions = sc.defaultParallelism
    counts, batch = batch_counts(lines, config, partitions)
    # Each bucket keeps its top keys only for a console sink.
    top_n = config.top_n if "console" in config.sinks else 0
    state = keep_totals(
        counts, batch, update_function(config), config.state_buckets, partitions, top_n, initial
    )
    state.checkpoint(spark_seconds(config.checkpoint_ms))
    view = StateView(
        bucketed=bool(config.state_buckets),
        add=reduce_functions(config)[0],
        changes=bool({"files", "postgres"} & set(config.sinks)),
    )
    attach_sinks(state, view, counts, config, metadata.app_id)
    if config.window is not None:
        from streaming_app.jobs.windows import windowed
        from streaming_app.sinks.attach import attach_window_sinks

        attach_window_sinks(windowed(counts, config), config)
    if config.snapshot_keep:
        snapshots = SnapshotSettings(
            directory=config.snapshots_at,
            interval_ms=config.snapshot_ms,
            keep=config.snapshot_keep,
            source=config.source,
            checkpoint_dir=config.checkpoint_dir,
            input_dir=config.input_dir,
            context_id=metadata.app_id,
        )
        state.foreachRDD(lambda t, rdd: write_snapshot(t, rdd, view, snapshots))
    attach_commit(state, config)  # last: a batch is committed once every sink has it
    return ssc
