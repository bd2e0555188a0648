"""The Kafka lag on the metrics endpoint's own schedule: the broker read by a thread of its own.

Driver side, either engine, while the endpoint serves a Kafka run: a daemon thread asks
the broker every `every` seconds for each partition's latest offset, with a client of its
own (`Broker`), and hands it, with the time of the reading, to the lag's bookkeeping
(common/kafka_lag.py), which interpolates lag in seconds from these readings
(kafka-lag-exporter's way). For each partition that lags it also fetches the first record
not yet processed, for its Kafka timestamp (klag-exporter's way), once per offset: while
the app is stuck, a reading fetches no record at all. A batch that leaves lag behind wakes
the thread (`wake`, at most every SOONEST_SECONDS). A reading that fails changes nothing
but the time of the last successful one, which is served
(`streaming_app_kafka_lag_read_timestamp_seconds`) and alerted on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from streaming_app.common.kafka_lag import KafkaLag
from streaming_app.common.retry import describe_error
from streaming_app.sources.kafka.client import REQUEST_TIMEOUT_MS, Broker, KafkaConnection
from streaming_app.sources.kafka.offsets import TopicPartition

log = logging.getLogger(__name__)

EVERY_SECONDS = 15.0  # the endpoint's schedule: about one scrape interval of most setups
SOONEST_SECONDS = 2.0  # between two readings, however often batches wake the thread
# Per partition and fetch: a record batch larger than this still comes whole (the broker
# returns at least one), so this only keeps the fetch from bringing a megabyte behind it.
FETCH_BYTES = 1024

Stamp = tuple[int, int]  # a record's offset and Kafka timestamp (epoch ms; -1: none)


class LagWatch:
    """Reads the broker on its own schedule and hands the endpoint what it found.

    lag: the endpoint's bookkeeping (common/kafka_lag.py): it gives the offsets whose
    record to fetch (`unread`) and takes what the broker says (`read`)."""

    def __init__(
        self,
        connection: KafkaConnection,
        topics: Iterable[str],
        lag: KafkaLag,
        every: float = EVERY_SECONDS,
        soonest: float = SOONEST_SECONDS,
        fetch_bytes: int = FETCH_BYTES,
    ) -> None:
        self.connection = connection
        self.topics = tuple(topics)
        self.lag = lag
        self.every = every
        self.soonest = soonest
        self.fetch_bytes = fetch_bytes
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._broker: Broker | None = None
        self._reader: Any = None
        self._failing = False  # the last reading failed (warned of once)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="kafka-lag-watch", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Read the broker soon (a batch left lag behind): the oldest unprocessed record
        moved on, and the last reading's timestamp no longer says how old it is."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=REQUEST_TIMEOUT_MS / 1000 + 5)
        self._close()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.every)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.read()
            if self._stop.wait(self.soonest):
                return

    def read(self) -> bool:
        """One reading that never raises: a failure is warned of once (then at debug level
        until a reading succeeds again, which is logged) and tried again next time.
        Whether it succeeded."""
        try:
            self.once()
        except Exception as exc:  # the broker unreachable: try again next time
            level = logging.DEBUG if self._failing else logging.WARNING
            log.log(
                level,
                "Kafka lag: reading the broker failed (%s); the lag series keep their last "
                "values and streaming_app_kafka_lag_read_timestamp_seconds its last success",
                describe_error(exc),
                exc_info=level == logging.DEBUG,
            )
            self._failing = True
            self._close()
            return False
        if self._failing:
            log.info("Kafka lag: the broker read again")
            self._failing = False
        return True

    def once(self) -> None:
        """One reading: the latest offsets, and the timestamp of each lagging partition's
        first unprocessed record not read before."""
        if self._broker is None:
            self._broker = Broker(self.connection, client_id="streaming-app-lag")
        found = self._broker.offsets(self.topics)
        stamps = self._timestamps(self.lag.unread(found.latest, found.earliest))
        self.lag.read(found.latest, stamps)

    def _timestamps(
        self, at: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """The offset and Kafka timestamp (epoch ms; -1: none) of the first record at or
        after each partition's offset (a compacted topic may lack that one)."""
        if not at:
            return {}
        from kafka import TopicPartition as KafkaTp

        from streaming_app.sources.kafka.client import new_consumer

        if self._reader is None:
            self._reader = new_consumer(
                **self.connection.kafka_kwargs(),
                client_id="streaming-app-lag",
                group_id=None,
                enable_auto_commit=False,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                max_poll_records=len(at),
                fetch_max_bytes=1 << 20,
                max_partition_fetch_bytes=self.fetch_bytes,
            )
        keyed = {KafkaTp(t, p): offset for (t, p), offset in at.items()}
        self._reader.assign(list(keyed))
        self._reader.resume(*keyed)  # paused at the last reading, once it had its record
        for tp, offset in keyed.items():
            self._reader.seek(tp, offset)
        found: dict[TopicPartition, Stamp] = {}
        deadline = time.monotonic() + REQUEST_TIMEOUT_MS / 1000
        while len(found) < len(keyed) and time.monotonic() < deadline:
            for tp, records in self._reader.poll(timeout_ms=500).items():
                if records and (tp.topic, tp.partition) not in found:
                    found[(tp.topic, tp.partition)] = (keyed[tp], int(records[0].timestamp))
                    self._reader.pause(tp)
        return found

    def _close(self) -> None:
        if self._broker is not None:
            self._broker.close()
            self._broker = None
        if self._reader is not None:
            try:
                self._reader.close()
            except Exception:
                log.debug("error closing a Kafka client", exc_info=True)
            self._reader = None
