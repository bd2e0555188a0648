"""Kafka's steps of a batch's commit, on the driver: the commit log, the group commit, pruning.

The order of the steps, and the check that every sink wrote the batch first, live in
sinks/commit.py; this module only does Kafka's part of each step.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from streaming_app.common.checkpoint_files import checkpoint_file_times
from streaming_app.common.fs import FileSystem
from streaming_app.common.per_batch import take_batch
from streaming_app.common.prometheus import count_bad_values
from streaming_app.sources.kafka.offset_log import (
    CommitLog,
    OffsetLog,
    prune_horizon,
)
from streaming_app.sources.kafka.offsets import OffsetRange, ends_of
from streaming_app.sources.kafka.reader import STAT_KEYS
from streaming_app.sources.kafka.runtime import RUNTIME, broker_for, offset_log_for

if TYPE_CHECKING:
    from streaming_app.sources.kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

# Listing the log directories costs a round trip per entry through Py4J: prune now and then.
PRUNE_EVERY_BATCHES = 10


def write_commit(batch_ms: int, state_saved: bool, settings: KafkaSettings) -> list[OffsetRange]:
    """Write `commits/<batch_ms>` and log the batch's value statistics; returns its ranges.

    state_saved: the batch's state RDD is checkpointed, so a graceful stop's drain may end.
    """
    offsets = _offset_log(settings)
    ranges = offsets.read_ranges(batch_ms) or []
    counts = _take_stats(batch_ms)
    CommitLog(offsets.fs, settings.checkpoint_dir).write(
        batch_ms,
        {"records": sum(r.size for r in ranges), "committed_at_ms": int(time.time() * 1000)},
    )
    _log_stats(batch_ms, counts)
    if state_saved:
        RUNTIME.state_saved_ms = batch_ms
    return ranges


def _offset_log(settings: KafkaSettings) -> OffsetLog:
    from pyspark import SparkContext

    return offset_log_for(SparkContext.getOrCreate(), settings.checkpoint_dir)


def commit_group(batch_ms: int, ranges: list[OffsetRange], settings: KafkaSettings) -> None:
    """Commit the batch's end offsets to the consumer group, for lag tools (informational).

    Only once Spark has written a checkpoint file: before that a crash discards the
    offset log, and a group commit made then could make a restart with
    starting_offsets=committed skip records whose counts were lost.
    """
    group_id = settings.group_id
    if not group_id or not ranges or not _checkpoint_written(settings):
        return
    broker = broker_for(settings)
    try:
        broker.commit(group_id, ends_of(ranges))
    except Exception as exc:  # informational only: the offset log is the truth
        from streaming_app.common.retry import describe_error

        broker.close_group(group_id)
        log.warning(
            "batch_time_ms=%d: could not commit offsets to group %s (%s); lag tools will "
            "lag behind, counts are not affected",
            batch_ms,
            group_id,
            describe_error(exc),
        )


def prune_logs(batch_ms: int, settings: KafkaSettings) -> None:
    """Every PRUNE_EVERY_BATCHES commits, remove log entries no recovery can need."""
    RUNTIME.commits_since_prune += 1
    if RUNTIME.commits_since_prune < PRUNE_EVERY_BATCHES:
        return
    RUNTIME.commits_since_prune = 0
    offsets = _offset_log(settings)
    fs: FileSystem = offsets.fs
    names = fs.list_names(settings.checkpoint_dir)
    before = prune_horizon(
        batch_ms, names, settings.batch_ms, settings.checkpoint_ms, settings.window_ms
    )
    if before is not None:
        commits = CommitLog(fs, settings.checkpoint_dir)
        pruned = offsets.prune(before) + commits.prune(before)
        log.debug("pruned %d log entries older than batch_time_ms=%d", len(pruned), before)


def _checkpoint_written(settings: KafkaSettings) -> bool:
    """Whether Spark has written a checkpoint file yet (looked up until it has)."""
    if not RUNTIME.checkpoint_seen:
        fs = _offset_log(settings).fs
        RUNTIME.checkpoint_seen = bool(
            checkpoint_file_times(fs.list_names(settings.checkpoint_dir))
        )
    return RUNTIME.checkpoint_seen


def _take_stats(batch_ms: int) -> dict[str, int]:
    if RUNTIME.stats is None:
        return {}
    by_batch: dict[int, dict[str, int]] = RUNTIME.stats.value
    return take_batch(by_batch, batch_ms, {})  # batches recomputed for lineage never commit


def _log_stats(batch_ms: int, counts: dict[str, int]) -> None:
    RUNTIME.totals.update(counts)
    count_bad_values({k: counts.get(k, 0) for k in STAT_KEYS[1:]})
    skipped = {k: counts.get(k, 0) for k in STAT_KEYS[1:] if counts.get(k)}
    line = ", ".join(f"{k}={v}" for k, v in skipped.items())
    if skipped:
        since = ", ".join(f"{k}={RUNTIME.totals[k]}" for k in STAT_KEYS if RUNTIME.totals[k])
        log.warning(
            "batch_time_ms=%d: kafka values skipped or repaired: %s "
            "(empty/null and oversize values are skipped; replaced = invalid UTF-8 "
            "decoded with U+FFFD; since start: %s)",
            batch_ms,
            line,
            since,
        )
    log.debug("committed batch_time_ms=%d records=%d", batch_ms, counts.get("records", 0))
