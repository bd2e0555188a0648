"""The one factory of the structured engine: the whole query, on its checkpoint location.

Driver side. `start_query` builds source, pairs, state and sinks and starts the query
with `checkpoint_dir` as its checkpointLocation, which plays getOrCreate's part: on a new
directory the query starts from nothing; on one it wrote before, Spark takes the source
position and the state from it and goes on after the last committed micro-batch (a
micro-batch that was planned but not committed runs again, with the same input).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from streaming_app.common.fs import FileSystem, join
from streaming_app.common.prometheus import replaying
from streaming_app.errors import CheckpointError
from streaming_app.recovery.metadata import METADATA_FORMAT, metadata_json
from streaming_app.recovery.restore import seeded_config
from streaming_app.settings.schema import AppConfig
from streaming_app.structured.guard import SHUFFLE_PARTITIONS, guard_checkpoint
from streaming_app.structured.kafka_options import KafkaReadSettings
from streaming_app.structured.kafka_start import report_start
from streaming_app.structured.pairs import pairs_of
from streaming_app.structured.problems import ProblemCounts
from streaming_app.structured.query_log import COMMITS, OFFSETS, last_batch
from streaming_app.structured.seed import (
    SUCCESS,
    plan_seed,
    seed_input,
    seed_pairs,
    write_seed_input,
)
from streaming_app.structured.sinks import BatchSinks
from streaming_app.structured.source import lines_of
from streaming_app.structured.totals import running_totals

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def written_by_dstreams(fs: FileSystem, checkpoint_dir: str) -> bool:
    """Whether a checkpoint directory holds a DStream engine's checkpoint."""
    if any(name.startswith("checkpoint-") for name in fs.list_names(checkpoint_dir)):
        return True
    record = metadata_json(fs, checkpoint_dir)
    return isinstance(record, dict) and record.get("format") == METADATA_FORMAT


def start_stream(
    frame: DataFrame,
    mode: str,
    sink: Callable[[DataFrame, int], None],
    checkpoint: str,
    batch_ms: int,
    name: str | None = None,
) -> Any:
    """Start a query of `frame`'s output in `mode`, written by the foreachBatch function
    `sink`, a micro-batch every `batch_ms` at most, on the checkpoint location."""
    writer = frame.writeStream if name is None else frame.writeStream.queryName(name)
    return (
        writer.outputMode(mode)
        .foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{batch_ms} milliseconds")
        .start()
    )


def start_query(spark: SparkSession, config: AppConfig) -> Any:
    """Build the whole query and start it on the checkpoint location; returns it running."""
    from streaming_app.common.hadoop_fs import HadoopFs

    checkpoint = config.checkpoint_dir
    fs = HadoopFs(spark.sparkContext, checkpoint)
    if written_by_dstreams(fs, checkpoint):
        raise CheckpointError(
            f"{checkpoint} is a checkpoint of the DStream engine; run it with --engine "
            "dstream, or give --engine structured a new checkpoint_dir"
        )
    partitions = int(spark.conf.get(SHUFFLE_PARTITIONS) or 0)
    seed = plan_seed(fs, config)  # before the guard writes its record into a new checkpoint
    restored = guard_checkpoint(fs, config, partitions)
    if restored is not None:  # on_incompatible_checkpoint: the old checkpoint was moved aside
        config = replace(config, restore_from_snapshot=restored.path)
        seed = plan_seed(fs, config)
        guard_checkpoint(fs, config, partitions)
    planned = last_batch(fs, join(checkpoint, OFFSETS))
    committed = last_batch(fs, join(checkpoint, COMMITS))
    if seed is not None:  # Kafka resumes at the snapshot's offsets
        config = seeded_config(config, seed)
        write_seed_input(spark, config, seed)
    if config.source == "kafka":  # lag served before the first micro-batch (kafka_start.py)
        report_start(fs, checkpoint, committed, KafkaReadSettings.from_config(config))
    # ProblemCounts is an AccumulatorParam by its methods (problems.py imports no Spark).
    problems: Any = spark.sparkContext.accumulator(Counter(), cast(Any, ProblemCounts()))
    pairs = pairs_of(lines_of(spark, config), config, problems)
    # A seeded query reads its seed input on every start (Spark's plan must keep its
    # sources); after micro-batch 0 there is nothing new in it.
    if fs.exists(join(seed_input(checkpoint), SUCCESS)):
        pairs = pairs.unionByName(seed_pairs(spark, config))
    query = start_stream(
        running_totals(pairs), "update", BatchSinks(config, problems), checkpoint, config.batch_ms
    )
    if planned is None:
        log.info(
            "Started new query id=%s on checkpoint %s%s",
            query.id,
            checkpoint,
            f" seeded from snapshot {seed.path}" if seed else "",
        )
    else:
        if committed is None or planned > committed:
            # Spark runs the planned micro-batch again first: not ready until the next.
            replaying(f"micro-batch {planned} (planned, not committed before the restart)", planned)
        log.info(
            "Recovered query id=%s from checkpoint %s: micro-batches up to %s committed, "
            "up to %d planned",
            query.id,
            checkpoint,
            "none" if committed is None else committed,
            planned,
        )
    return query
