"""The structured engine's Kafka source: a Python streaming data source on kafka-python.

Planning runs on the driver side, in the data source's long-lived planner worker (a
Python process Spark starts next to the driver): `initialOffset` (the starting offsets),
`latestOffset` (the broker's latest, capped per partition), `partitions` (one per
partition with records). Spark writes each micro-batch's end offset to the query's
`offsets/` log before it runs, and derives its ranges from the previous end, so a
replay after a crash reads exactly the same records. `read` runs on the executors, once
per partition: `sources/kafka/reader.read_range` with its own consumer (assign + seek,
no group), values decoded as with DStreams. Rows have a `value` column, like the
other sources' lines, and a `problems` column, null but on one more row of a range that
had values skipped or repaired: its counts, which the driver warns of (problems.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from streaming_app.common.log_format import ensure_worker_logging
from streaming_app.common.retry import describe_error, with_retries
from streaming_app.lifecycle.worker_daemon import freeze_once
from streaming_app.sources.kafka.client import Broker
from streaming_app.sources.kafka.offsets import BrokerOffsets, OffsetRange
from streaming_app.sources.kafka.reader import read_range
from streaming_app.structured.kafka_offsets import (
    Planned,
    from_json,
    initial_positions,
    next_positions,
    ranges_between,
    to_json,
)
from streaming_app.structured.kafka_options import KafkaReadSettings
from streaming_app.structured.problems import encode

log = logging.getLogger(__name__)

T = TypeVar("T")

NAME = "streaming_app_kafka"
# Rows per Arrow batch handed back to Spark from `read`.
ROWS_PER_BATCH = 10_000
# The values, and on one more row a range's read counts worth a warning (problems.encode).
SCHEMA = "value string, problems string"


class KafkaPartition(InputPartition):
    """One task's work: the records `[from, until)` of one topic-partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(tuple(offset_range))

    @property
    def offset_range(self) -> OffsetRange:
        """The range to read."""
        return OffsetRange(*self.value)


class KafkaDataSource(DataSource):
    """`spark.readStream.format("streaming_app_kafka")`: options from KafkaReadSettings."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        return KafkaStreamReader(KafkaReadSettings.from_options(self.options))


def read_limit(max_per_partition: int) -> ReadLimit:
    """The default read limit: the per-partition cap as ReadMaxRows, or all available."""
    return ReadMaxRows(max_per_partition) if max_per_partition > 0 else ReadAllAvailable()


def cap_of(limit: ReadLimit) -> int:
    """The per-partition cap a read limit sets (0 = none).

    ReadMaxRows is applied per partition (as max_rate_per_partition is with DStreams),
    not to the micro-batch's total; any other limit Spark passes reads all available.
    """
    return limit.max_rows if isinstance(limit, ReadMaxRows) else 0


class KafkaStreamReader(DataSourceStreamReader):
    """Plans micro-batches on the driver side; reads one partition's range on executors."""

    def __init__(self, settings: KafkaReadSettings) -> None:
        # Cheap: Spark builds one in the planner worker and one to ship to executors.
        self.settings = settings
        self._broker: Broker | None = None
        self._initial: dict[str, Any] | None = None
        # The broker's latest offsets at the last planning: reported for the progress
        # event's `latestOffset` (the metrics file's kafka_lag).
        self._latest: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "_broker": None,
            "_initial": None,
            "_latest": None,
        }  # a client does not pickle

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        """Where a new query starts: starting_offsets applied to the broker's offsets.

        Spark asks again at every trigger until the first micro-batch is logged: the
        first answer is kept, or starting_offsets=latest would skip what arrives between
        two triggers. (A restart before the first micro-batch asks the broker anew.)
        """
        if self._initial is not None:
            return self._initial
        settings = self.settings
        want_committed = settings.starting_offsets == "committed"
        broker = self._ask("reading offsets", lambda b: self._offsets(b, want_committed))
        planned = initial_positions(broker, settings.starting_offsets, settings.on_out_of_range)
        self._report("initial offsets", planned)
        self._initial = to_json(planned.positions)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        return read_limit(self.settings.max_per_partition)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        """The next micro-batch's end: the broker's latest, at most `limit` per partition."""
        settings = self.settings
        broker = self._ask("reading offsets", lambda b: self._offsets(b, False))
        planned = next_positions(
            from_json(start),
            broker,
            settings.starting_offsets,
            cap_of(limit),
            settings.on_out_of_range,
        )
        self._report("planning", planned)
        self._latest = to_json(broker.latest)
        return to_json(planned.positions)

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802
        """The broker's latest offsets when the micro-batch was planned (None before that)."""
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One partition per topic-partition with records in `[start, end)`."""
        return [KafkaPartition(r) for r in ranges_between(from_json(start), from_json(end))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Executor side: the range's values, as Arrow batches of a `value` column, and its
        read counts worth a warning (problems.py) in the `problems` column of one more row."""
        import pyarrow as pa

        freeze_once()  # what this worker imported since its fork, Arrow above among them
        assert isinstance(partition, KafkaPartition)
        offset_range = partition.offset_range
        counts = _Counts()
        values = read_range(
            offset_range,
            self.settings.connection,
            self.settings.max_value_bytes,
            self.settings.on_out_of_range,
            stats=counts,
            give_up_after=self.settings.give_up_after,
        )

        def arrow(values: list[str | None], problems: list[str | None]) -> Any:
            return pa.RecordBatch.from_arrays(
                [pa.array(values, pa.string()), pa.array(problems, pa.string())],
                ["value", "problems"],
            )

        chunk: list[str | None] = []
        for value in values:
            chunk.append(value)
            if len(chunk) >= ROWS_PER_BATCH:
                yield arrow(chunk, [None] * len(chunk))
                chunk = []
        if chunk:
            yield arrow(chunk, [None] * len(chunk))
        counts.report(offset_range)
        problems = encode(counts.counts)
        if problems:
            yield arrow([None], [problems])

    def commit(self, end: dict[str, Any]) -> None:
        """After a micro-batch: its end offsets to the consumer group, for lag tools only."""
        group = self.settings.group_id
        if not group:
            return
        try:
            self._client().commit(group, from_json(end))
        except Exception as exc:  # progress is in the checkpoint; a missed commit is harmless
            log.warning("committing offsets to group %s failed: %s", group, describe_error(exc))
            self._client().close_group(group)

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.close()
            self._broker = None

    def _client(self) -> Broker:
        if self._broker is None:
            self._broker = Broker(self.settings.connection, client_id="streaming-app-planner")
        return self._broker

    def _offsets(self, broker: Broker, want_committed: bool) -> BrokerOffsets:
        return broker.offsets(self.settings.topics, self.settings.group_id, want_committed)

    def _ask(self, what: str, call: Callable[[Broker], T]) -> T:
        """Call the broker, retrying with backoff; after kafka_give_up_after, fail the query
        with PeerUnreachableError (a supervisor restarts it; nothing was planned, nothing
        is lost). Without a limit, until the query is stopped (hard, after stop_timeout:
        this worker cannot see the driver's stop)."""
        ensure_worker_logging()  # its warnings with time and level, like the driver's
        return with_retries(
            f"{what} of {','.join(self.settings.topics)} from {self.settings.connection.peer}",
            lambda: call(self._client()),
            threading.Event(),
            on_failure=self.stop,
            give_up_after=self.settings.give_up_after,
            setting="kafka_give_up_after",
        )

    @staticmethod
    def _report(what: str, planned: Planned) -> None:
        for note in planned.notes:
            log.info("kafka %s: %s", what, note)
        for warning in planned.warnings:
            log.warning("kafka %s: %s", what, warning)


class _Counts:
    """read_range's counts of one range (the driver warns of those in problems.KAFKA)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, by_batch: dict[int, dict[str, int]]) -> None:
        for counts in by_batch.values():
            for key, count in counts.items():
                self.counts[key] = self.counts.get(key, 0) + count

    def report(self, offset_range: OffsetRange) -> None:
        topic, partition, start, until = offset_range
        log.debug(
            "read topic=%s partition=%d from=%d until=%d counts=%s",
            topic, partition, start, until, self.counts,
        )  # fmt: skip
