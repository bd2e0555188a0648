"""Planning a Kafka batch on the driver: its offset ranges, logged before the batch runs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.common.fs import FileSystem
from streaming_app.common.output_errors import app_errors_in_one_line
from streaming_app.common.prometheus import kafka_started
from streaming_app.errors import CheckpointError
from streaming_app.sources.kafka.offset_log import (
    CommitLog,
    OffsetLog,
)
from streaming_app.sources.kafka.offsets import (
    BrokerOffsets,
    OffsetRange,
    ends_of,
    plan_ranges,
)
from streaming_app.sources.kafka.reader import read_range
from streaming_app.sources.kafka.runtime import (
    RUNTIME,
    StatsParam,
    broker_offsets,
    connection_for,
    note_figures,
    offset_log_for,
    policy_for,
    warn_once,
)
from streaming_app.sources.kafka.settings import KafkaSettings

if TYPE_CHECKING:
    from pyspark import RDD


log = logging.getLogger(__name__)


def discard_orphaned_logs(fs: FileSystem, checkpoint_dir: str) -> None:
    """Remove offset and commit logs that no checkpoint goes with (new context only).

    A new context starts with empty state: there is no Spark checkpoint. Log entries
    left by a run killed before its first checkpoint describe batches whose counts were
    never saved; continuing after them would lose those records, so the stream starts
    again from the starting offsets.
    """
    offsets = OffsetLog(fs, checkpoint_dir)
    planned = offsets.batch_times()
    if not planned:
        return
    log.warning(
        "discarding the offset log of an earlier run that never wrote a checkpoint "
        "(%d planned batches, none of them saved in the state); reading again from "
        "starting_offsets",
        len(planned),
    )
    fs.delete(offsets.directory)
    fs.delete(CommitLog(fs, checkpoint_dir).directory)


def plan_batch(batch_time: datetime, rdd: RDD[Any], settings: KafkaSettings) -> RDD[str]:
    """The batch's RDD of message values: logged ranges if any, else newly planned ones.

    The app's own errors (a broker given up on, lost offsets) end the run with one line:
    Spark's log of the failed job generation, with stack traces, is turned off.
    """
    batch_ms = epoch_ms(batch_time)
    sc = rdd.context
    offsets = offset_log_for(sc, settings.checkpoint_dir)
    fetch = partial(broker_offsets, settings)
    with app_errors_in_one_line(sc):
        ranges = ranges_for_batch(batch_ms, offsets, fetch, settings, RUNTIME.draining)
    # Where the run starts, for the lag served before its first batch completes.
    kafka_started({(r.topic, r.partition): r.from_offset for r in ranges})
    to_read = [r for r in ranges if r.size > 0]
    if not to_read:
        return sc.emptyRDD()  # no tasks at all: an idle batch stays cheap
    RUNTIME.last_data_ms = max(batch_ms, RUNTIME.last_data_ms or 0)
    if RUNTIME.stats is None:
        RUNTIME.stats = sc.accumulator({}, StatsParam())
    reader = partial(
        read_range,
        connection=connection_for(settings),
        max_value_bytes=settings.max_value_bytes,
        on_out_of_range=policy_for(settings),
        batch_ms=batch_ms,
        stats=RUNTIME.stats,
        give_up_after=RUNTIME.give_up_after,
        joined=settings.joined_values,
    )
    return sc.parallelize(to_read, len(to_read)).flatMap(reader)


def ranges_for_batch(
    batch_ms: int,
    offsets: OffsetLog,
    broker_offsets: Callable[[bool], BrokerOffsets],
    settings: KafkaSettings,
    draining: bool = False,
) -> list[OffsetRange]:
    """The ranges of a batch: from the offset log if it was planned before, else planned.

    New ranges are written to the log before they are returned, so a batch that runs
    has always been logged, and a replay reads exactly what the first run read.
    broker_offsets(want_committed) asks the broker (retrying until it answers, or until
    kafka_give_up_after).
    While draining (a graceful stop), new batches are planned empty.
    """
    logged = offsets.read_ranges(batch_ms)
    if logged is not None:
        log.info(
            "replaying batch_time_ms=%d from the offset log: %d records in %d ranges",
            batch_ms,
            sum(r.size for r in logged),
            sum(1 for r in logged if r.size),
        )
        ends = tuple((r.topic, r.partition, r.until_offset, None) for r in logged)
        note_figures(batch_ms, sum(r.size for r in logged), None, ends)
        return logged
    newest = offsets.newest()
    if newest is not None and newest[0] > batch_ms:
        raise CheckpointError(
            f"the offset log has no entry for batch_time_ms={batch_ms} but has newer ones; "
            "it was pruned or edited. Move the checkpoint directory aside to start afresh"
        )
    if draining:
        empty = [OffsetRange(t, p, end, end) for t, p, _, end in newest[1]] if newest else []
        offsets.write_ranges(batch_ms, empty)
        log.debug("stopping: batch_time_ms=%d planned empty", batch_ms)
        note_figures(batch_ms, 0, None)
        return empty
    no_position = newest is None or not newest[1]
    current = broker_offsets(no_position and settings.starting_offsets == "committed")
    if not current.latest:
        warn_once(
            "no-partitions",
            "topics %s have no partitions on the broker (do they exist?); waiting for them",
            ",".join(settings.topics),
        )
    plan = plan_ranges(
        ends_of(newest[1]) if newest else None,
        current,
        settings.starting_offsets,
        settings.max_per_partition,
        policy_for(settings),
    )
    for note in plan.notes:
        log.info("batch_time_ms=%d: %s", batch_ms, note)
    for warning in plan.warnings:
        log.warning("batch_time_ms=%d: %s", batch_ms, warning)
    offsets.write_ranges(batch_ms, plan.ranges)
    lag = sum(
        current.latest.get((r.topic, r.partition), r.until_offset) - r.until_offset
        for r in plan.ranges
    )
    records = sum(r.size for r in plan.ranges)
    log.debug("planned batch_time_ms=%d records=%d lag_after=%d", batch_ms, records, lag)
    positions = tuple(
        (r.topic, r.partition, r.until_offset, current.latest.get((r.topic, r.partition)))
        for r in plan.ranges
    )
    note_figures(batch_ms, records, lag, positions)
    return plan.ranges
