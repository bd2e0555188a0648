"""The Kafka source's driver-process state: today's connection, the broker client, the drain."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.accumulators import AccumulatorParam

from streaming_app.common.fs import join
from streaming_app.common.per_batch import remember
from streaming_app.common.retry import with_retries
from streaming_app.errors import PeerUnreachableError
from streaming_app.sources.kafka.client import Broker, KafkaConnection
from streaming_app.sources.kafka.offset_log import (
    OFFSETS_DIR,
    OffsetLog,
)
from streaming_app.sources.kafka.offsets import (
    BrokerOffsets,
)
from streaming_app.sources.kafka.reader import BatchStats
from streaming_app.sources.kafka.settings import KafkaSettings

if TYPE_CHECKING:
    from streaming_app.settings.schema import AppConfig


log = logging.getLogger(__name__)


@dataclass
class _Runtime:
    """Driver-process state that must not go into the checkpoint."""

    connection: KafkaConnection | None = None  # today's, with credentials
    on_out_of_range: str | None = None  # today's: the remedy the error message suggests
    stop: threading.Event = field(default_factory=threading.Event)
    give_up_after: float | None = None  # today's kafka_give_up_after (None: until stopped)
    gave_up: str | None = None  # the line the broker was given up with: the run is ending
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
    # batch time -> each partition's (topic, partition, end offset, broker's latest or None).
    positions: dict[int, tuple[tuple[str, int, int, int | None], ...]] = field(default_factory=dict)


RUNTIME = _Runtime()


def note_figures(
    batch_ms: int,
    records: int,
    lag: int | None,
    positions: tuple[tuple[str, int, int, int | None], ...] = (),
) -> None:
    """Keep a planned batch's figures (and each partition's position) for the listener."""
    remember(RUNTIME.figures, batch_ms, (records, lag))
    remember(RUNTIME.positions, batch_ms, positions)


def batch_figures(batch_ms: int) -> tuple[int, int | None] | None:
    """Records read by a batch and the lag after it (None if replayed); forgotten once asked."""
    return RUNTIME.figures.pop(batch_ms, None)


def batch_positions(batch_ms: int) -> tuple[tuple[str, int, int, int | None], ...]:
    """Each partition's (topic, partition, end offset, broker's latest or None) after a
    batch; forgotten once asked."""
    return RUNTIME.positions.pop(batch_ms, ())


def configure_runtime(config: AppConfig, stop: threading.Event) -> None:
    """Give this driver process today's connection settings and the stop signal.

    Connection settings (brokers, credentials), the out-of-range policy and how long an
    unreachable broker is retried come from the running config, not the checkpoint:
    credentials are never checkpointed, brokers may have moved, and an operator must be
    able to choose `earliest` after a `fail`, or to wait longer for a broker.
    """
    RUNTIME.connection = KafkaConnection.from_config(config)
    RUNTIME.on_out_of_range = config.on_offset_out_of_range
    RUNTIME.give_up_after = config.kafka_give_up_after
    RUNTIME.gave_up = None
    RUNTIME.stop = stop
    if RUNTIME.broker is not None:
        RUNTIME.broker.close()
        RUNTIME.broker = None


def connection_for(settings: KafkaSettings) -> KafkaConnection:
    current = RUNTIME.connection
    if current is None:
        return settings.connection
    if current.bootstrap_servers != settings.connection.bootstrap_servers:
        warn_once(
            "bootstrap",
            "bootstrap_servers %s differ from the checkpoint's %s; using %s",
            current.bootstrap_servers,
            settings.connection.bootstrap_servers,
            current.bootstrap_servers,
        )
    return current


def policy_for(settings: KafkaSettings) -> str:
    return RUNTIME.on_out_of_range or settings.on_out_of_range


def warn_once(key: str, message: str, *args: Any) -> None:
    if key not in RUNTIME.announced:
        RUNTIME.announced.add(key)
        log.warning(message, *args)


def broker_for(settings: KafkaSettings) -> Broker:
    if RUNTIME.broker is None:
        RUNTIME.broker = Broker(connection_for(settings))
    return RUNTIME.broker


def reset_broker() -> None:
    if RUNTIME.broker is not None:
        RUNTIME.broker.close()


def offset_log_for(sc: Any, checkpoint_dir: str) -> OffsetLog:
    from streaming_app.common.hadoop_fs import HadoopFs

    current = RUNTIME.offset_log
    if current is None or current.directory != join(checkpoint_dir, OFFSETS_DIR):
        current = OffsetLog(HadoopFs(sc, checkpoint_dir), checkpoint_dir)
        RUNTIME.offset_log = current
    return current


def broker_offsets(settings: KafkaSettings, want_committed: bool) -> BrokerOffsets:
    """The broker's offsets, retried until it answers, the app stops (StopRequestedError),
    or kafka_give_up_after has passed (PeerUnreachableError: the run's one line)."""
    if RUNTIME.gave_up is not None:
        # The batches queued behind the one that gave up: the run is ending, none waits again.
        raise PeerUnreachableError(RUNTIME.gave_up)
    broker = broker_for(settings)
    try:
        return with_retries(
            f"reading offsets of {','.join(settings.topics)} from {broker.connection.peer}",
            lambda: broker.offsets(settings.topics, settings.group_id, want_committed),
            RUNTIME.stop,
            on_failure=reset_broker,
            give_up_after=RUNTIME.give_up_after,
            setting="kafka_give_up_after",
            peer="kafka",
        )
    except PeerUnreachableError as exc:
        RUNTIME.gave_up = str(exc)
        raise


def drain(timeout: float, ended: Callable[[], bool] = lambda: False) -> bool:
    """Stop taking new records, and wait until the saved state covers every batch read.

    Spark re-runs the batches after its last state checkpoint when it restarts, reading
    their records again (exactly, from the offset log). Draining until a state checkpoint
    covers the last batch with records makes the restart after a graceful stop re-read
    nothing. Returns False if that did not happen within `timeout` seconds, or if the
    context ended meanwhile (`ended()`: the JVM got the signal too).
    """
    RUNTIME.draining = True
    deadline = time.monotonic() + timeout
    while True:
        data, saved = RUNTIME.last_data_ms, RUNTIME.state_saved_ms
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


class StatsParam(AccumulatorParam[BatchStats]):
    """Accumulates read statistics per batch: {batch_ms: {key: count}}.

    One accumulator serves the whole driver process (PySpark never forgets an
    accumulator, so one per batch would leak); the driver pops each batch's entry.
    """

    def zero(self, value: BatchStats) -> BatchStats:
        return {}

    def addInPlace(self, first: BatchStats, second: BatchStats) -> BatchStats:  # noqa: N802
        for batch_ms, counts in second.items():
            into = first.setdefault(batch_ms, {})
            for key, count in counts.items():
                into[key] = into.get(key, 0) + count
        return first
