"""The Kafka source: a deterministic direct stream planned on the driver from an offset log.

A cheap tick stream (an empty watched directory) drives the batches. For each batch time
`plan_batch` reuses the ranges the offset log holds for it (a replay after recovery) or
plans new ones and logs them atomically before the batch runs; executors then read
exactly those ranges. `commit_batch`, the last output operation, marks the batch done.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import FileSystem, join
from streaming_app.errors import CheckpointError
from streaming_app.sinks.attach import epoch_ms, take_written
from streaming_app.sources.kafka.client import Broker, KafkaConnection, with_retries
from streaming_app.sources.kafka.offset_log import (
    OFFSETS_DIR,
    CommitLog,
    OffsetLog,
    checkpoint_file_times,
    prune_horizon,
)
from streaming_app.sources.kafka.offsets import (
    BrokerOffsets,
    OffsetRange,
    cap_for,
    ends_of,
    plan_ranges,
)
from streaming_app.sources.kafka.reader import STAT_KEYS, StatsParam, read_range

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.streaming import DStream, StreamingContext

    from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)

TICK_DIR = "kafka-tick"
# Listing the log directories costs a round trip per entry through Py4J: prune now and then.
PRUNE_EVERY_BATCHES = 10


@dataclass(frozen=True)
class KafkaSettings:
    """What the Kafka stream captures into the checkpoint: no credentials."""

    checkpoint_dir: str
    topics: tuple[str, ...]
    starting_offsets: str
    max_per_partition: int
    group_id: str | None
    on_out_of_range: str
    max_value_bytes: int
    batch_ms: int
    checkpoint_ms: int
    connection: KafkaConnection
    window_ms: int = 0  # a default: checkpoints written before windows lack it

    @classmethod
    def from_config(cls, config: AppConfig) -> KafkaSettings:
        """The settings of a new stream."""
        return cls(
            checkpoint_dir=config.checkpoint_dir,
            topics=config.topics,
            starting_offsets=config.starting_offsets,
            max_per_partition=cap_for(config.max_rate_per_partition, config.batch_ms),
            group_id=config.group_id,
            on_out_of_range=config.on_offset_out_of_range,
            max_value_bytes=config.max_value_bytes,
            batch_ms=config.batch_ms,
            checkpoint_ms=config.checkpoint_ms,
            connection=KafkaConnection.from_config(config).without_secrets(),
            window_ms=config.window_ms or 0,
        )


@dataclass
class _Runtime:
    """Driver-process state that must not go into the checkpoint."""

    connection: KafkaConnection | None = None  # today's, with credentials
    on_out_of_range: str | None = None  # today's: the remedy the error message suggests
    stop: threading.Event = field(default_factory=threading.Event)
    broker: Broker | None = None
    stats: Any = None  # the process's read-statistics accumulator, made on first use
    draining: bool = False  # stopping: new batches take no records
    last_data_ms: int | None = None  # newest batch with records run by this process
    state_saved_ms: int | None = None  # newest committed batch whose state is checkpointed
    totals: Counter[str] = field(default_factory=Counter)
    announced: set[str] = field(default_factory=set)
    offset_log: OffsetLog | None = None  # kept for its cache of the newest entry
    commits_since_prune: int = 0
    checkpoint_seen: bool = False
    # batch time -> (records planned, lag left on the broker or None), for the metrics.
    figures: dict[int, tuple[int, int | None]] = field(default_factory=dict)


_RUNTIME = _Runtime()
# Figures kept for batches the listener has not reported yet (a backlog after down time).
_MAX_FIGURES = 10_000


def _note_figures(batch_ms: int, records: int, lag: int | None) -> None:
    figures = _RUNTIME.figures
    figures[batch_ms] = (records, lag)
    while len(figures) > _MAX_FIGURES:
        del figures[min(figures)]


def batch_figures(batch_ms: int) -> tuple[int, int | None] | None:
    """Records read by a batch and the lag after it (None if replayed); forgotten once asked."""
    return _RUNTIME.figures.pop(batch_ms, None)


def configure_runtime(config: AppConfig, stop: threading.Event) -> None:
    """Give this driver process today's connection settings and the stop signal.

    Connection settings (brokers, credentials) and the out-of-range policy come from the
    running config, not the checkpoint: credentials are never checkpointed, brokers may
    have moved, and an operator must be able to choose `earliest` after a `fail`.
    """
    _RUNTIME.connection = KafkaConnection.from_config(config)
    _RUNTIME.on_out_of_range = config.on_offset_out_of_range
    _RUNTIME.stop = stop
    if _RUNTIME.broker is not None:
        _RUNTIME.broker.close()
        _RUNTIME.broker = None


def _connection(settings: KafkaSettings) -> KafkaConnection:
    current = _RUNTIME.connection
    if current is None:
        return settings.connection
    if current.bootstrap_servers != settings.connection.bootstrap_servers:
        _once(
            "bootstrap",
            "bootstrap_servers %s differ from the checkpoint's %s; using %s",
            current.bootstrap_servers,
            settings.connection.bootstrap_servers,
            current.bootstrap_servers,
        )
    return current


def _policy(settings: KafkaSettings) -> str:
    return _RUNTIME.on_out_of_range or settings.on_out_of_range


def _once(key: str, message: str, *args: Any) -> None:
    if key not in _RUNTIME.announced:
        _RUNTIME.announced.add(key)
        log.warning(message, *args)


def _broker(settings: KafkaSettings) -> Broker:
    if _RUNTIME.broker is None:
        _RUNTIME.broker = Broker(_connection(settings))
    return _RUNTIME.broker


def _reset_broker() -> None:
    if _RUNTIME.broker is not None:
        _RUNTIME.broker.close()


def kafka_lines(ssc: StreamingContext, config: AppConfig) -> DStream[str]:
    """Message values of the configured topics, one batch per planned set of ranges."""
    from streaming_app.common.hadoop_fs import HadoopFs

    settings = KafkaSettings.from_config(config)
    fs = HadoopFs(ssc.sparkContext, config.checkpoint_dir)
    discard_orphaned_logs(fs, config.checkpoint_dir)
    tick_dir = join(config.checkpoint_dir, TICK_DIR)
    fs.mkdirs(tick_dir)
    log.info(
        "source: kafka topics=%s bootstrap_servers=%s starting_offsets=%s "
        "max_records_per_partition_per_batch=%s (exactly-once across driver crashes)",
        ",".join(settings.topics),
        settings.connection.bootstrap_servers,
        settings.starting_offsets,
        settings.max_per_partition or "unlimited",
    )
    tick = ssc.textFileStream(tick_dir)
    # The lambda captures only the frozen settings, so it pickles into the checkpoint.
    return tick.transform(lambda t, rdd: plan_batch(t, rdd, settings))


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
    """The batch's RDD of message values: logged ranges if any, else newly planned ones."""
    batch_ms = epoch_ms(batch_time)
    sc = rdd.context
    offsets = _offset_log(sc, settings.checkpoint_dir)
    fetch = partial(_broker_offsets, settings)
    ranges = ranges_for_batch(batch_ms, offsets, fetch, settings, _RUNTIME.draining)
    to_read = [r for r in ranges if r.size > 0]
    if not to_read:
        return sc.emptyRDD()  # no tasks at all: an idle batch stays cheap
    _RUNTIME.last_data_ms = max(batch_ms, _RUNTIME.last_data_ms or 0)
    if _RUNTIME.stats is None:
        _RUNTIME.stats = sc.accumulator({}, StatsParam())
    reader = partial(
        read_range,
        connection=_connection(settings),
        max_value_bytes=settings.max_value_bytes,
        on_out_of_range=_policy(settings),
        batch_ms=batch_ms,
        stats=_RUNTIME.stats,
    )
    return sc.parallelize(to_read, len(to_read)).flatMap(reader)


def _offset_log(sc: Any, checkpoint_dir: str) -> OffsetLog:
    from streaming_app.common.hadoop_fs import HadoopFs

    current = _RUNTIME.offset_log
    if current is None or current.directory != join(checkpoint_dir, OFFSETS_DIR):
        current = OffsetLog(HadoopFs(sc, checkpoint_dir), checkpoint_dir)
        _RUNTIME.offset_log = current
    return current


def _broker_offsets(settings: KafkaSettings, want_committed: bool) -> BrokerOffsets:
    broker = _broker(settings)
    return with_retries(
        f"reading offsets of {','.join(settings.topics)} from "
        f"{broker.connection.bootstrap_servers}",
        lambda: broker.offsets(settings.topics, settings.group_id, want_committed),
        _RUNTIME.stop,
        on_failure=_reset_broker,
    )


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
    broker_offsets(want_committed) asks the broker (retrying until it answers).
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
        _note_figures(batch_ms, sum(r.size for r in logged), None)
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
        _note_figures(batch_ms, 0, None)
        return empty
    no_position = newest is None or not newest[1]
    current = broker_offsets(no_position and settings.starting_offsets == "committed")
    if not current.latest:
        _once(
            "no-partitions",
            "topics %s have no partitions on the broker (do they exist?); waiting for them",
            ",".join(settings.topics),
        )
    plan = plan_ranges(
        ends_of(newest[1]) if newest else None,
        current,
        settings.starting_offsets,
        settings.max_per_partition,
        _policy(settings),
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
    _note_figures(batch_ms, records, lag)
    return plan.ranges


def commit_batch(
    batch_time: datetime, rdd: RDD[Any], settings: KafkaSettings, sinks: tuple[str, ...]
) -> None:
    """Mark a batch done once every sink has written it; then group commit and prune."""
    from pyspark import SparkContext

    batch_ms = epoch_ms(batch_time)
    missing = set(sinks) - take_written(batch_ms)
    if missing:
        log.warning(
            "batch_time_ms=%d: not committed: sink(s) %s did not complete (the app "
            "stops; the restart replays the batch)",
            batch_ms,
            ", ".join(sorted(missing)),
        )
        return
    offsets = _offset_log(SparkContext.getOrCreate(), settings.checkpoint_dir)
    fs = offsets.fs
    commits = CommitLog(fs, settings.checkpoint_dir)
    ranges = offsets.read_ranges(batch_ms) or []
    counts = _take_stats(batch_ms)
    commits.write(
        batch_ms,
        {"records": sum(r.size for r in ranges), "committed_at_ms": int(time.time() * 1000)},
    )
    _log_stats(batch_ms, counts)
    if rdd.isCheckpointed():  # the sinks' jobs have computed and saved this batch's state
        _RUNTIME.state_saved_ms = batch_ms
    if settings.group_id and ranges and _checkpoint_written(fs, settings.checkpoint_dir):
        _commit_group(settings, batch_ms, ranges)
    _RUNTIME.commits_since_prune += 1
    if _RUNTIME.commits_since_prune >= PRUNE_EVERY_BATCHES:
        _RUNTIME.commits_since_prune = 0
        names = fs.list_names(settings.checkpoint_dir)
        before = prune_horizon(
            batch_ms, names, settings.batch_ms, settings.checkpoint_ms, settings.window_ms
        )
        if before is not None:
            pruned = offsets.prune(before) + commits.prune(before)
            log.debug("pruned %d log entries older than batch_time_ms=%d", len(pruned), before)


def _checkpoint_written(fs: FileSystem, checkpoint_dir: str) -> bool:
    """Whether Spark has written a checkpoint file yet (looked up until it has).

    Before that, a crash discards the offset log; a group commit made then could make
    a restart with starting_offsets=committed skip records whose counts were lost.
    """
    if not _RUNTIME.checkpoint_seen:
        names = fs.list_names(checkpoint_dir)
        _RUNTIME.checkpoint_seen = bool(checkpoint_file_times(names))
    return _RUNTIME.checkpoint_seen


def _take_stats(batch_ms: int) -> dict[str, int]:
    if _RUNTIME.stats is None:
        return {}
    by_batch: dict[int, dict[str, int]] = _RUNTIME.stats.value
    counts = by_batch.pop(batch_ms, {})
    for stale in [t for t in by_batch if t < batch_ms]:
        del by_batch[stale]  # batches recomputed for lineage never commit
    return counts


def _log_stats(batch_ms: int, counts: dict[str, int]) -> None:
    _RUNTIME.totals.update(counts)
    skipped = {k: counts.get(k, 0) for k in STAT_KEYS[1:] if counts.get(k)}
    line = ", ".join(f"{k}={v}" for k, v in skipped.items())
    if skipped:
        since = ", ".join(f"{k}={_RUNTIME.totals[k]}" for k in STAT_KEYS if _RUNTIME.totals[k])
        log.warning(
            "batch_time_ms=%d: kafka values skipped or repaired: %s "
            "(empty/null and oversize values are skipped; replaced = invalid UTF-8 "
            "decoded with U+FFFD; since start: %s)",
            batch_ms,
            line,
            since,
        )
    log.debug("committed batch_time_ms=%d records=%d", batch_ms, counts.get("records", 0))


def _commit_group(settings: KafkaSettings, batch_ms: int, ranges: list[OffsetRange]) -> None:
    group_id = settings.group_id
    assert group_id is not None
    broker = _broker(settings)
    try:
        broker.commit(group_id, ends_of(ranges))
    except Exception as exc:  # informational only: the offset log is the truth
        from streaming_app.sources.kafka.client import describe_error

        broker.close_group(group_id)
        log.warning(
            "batch_time_ms=%d: could not commit offsets to group %s (%s); lag tools will "
            "lag behind, counts are not affected",
            batch_ms,
            group_id,
            describe_error(exc),
        )


def drain(timeout: float, ended: Callable[[], bool] = lambda: False) -> bool:
    """Stop taking new records, and wait until the saved state covers every batch read.

    Spark re-runs the batches after its last state checkpoint when it restarts, reading
    their records again (exactly, from the offset log). Draining until a state checkpoint
    covers the last batch with records makes the restart after a graceful stop re-read
    nothing. Returns False if that did not happen within `timeout` seconds, or if the
    context ended meanwhile (`ended()`: the JVM got the signal too).
    """
    _RUNTIME.draining = True
    deadline = time.monotonic() + timeout
    while True:
        data, saved = _RUNTIME.last_data_ms, _RUNTIME.state_saved_ms
        if data is None or (saved is not None and saved >= data):
            return True
        if time.monotonic() >= deadline:
            return False
        try:
            if ended():
                return False
        except Exception:  # the context failed or is gone: nothing more will commit
            return False
        time.sleep(0.1)


def attach_commit(totals: DStream[Any], config: AppConfig) -> None:
    """Register the commit as the last output operation (after every sink)."""
    settings = KafkaSettings.from_config(config)
    sinks = config.sinks
    totals.foreachRDD(lambda t, rdd: commit_batch(t, rdd, settings, sinks))
