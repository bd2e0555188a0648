"""The Kafka lag on the metrics endpoint's own schedule, in records and in seconds.

Driver side, either engine, while the endpoint serves a Kafka run: a daemon thread asks
the broker every `every` seconds for each partition's latest offset, with a client of its
own (`Broker`), and for each partition that lags behind what the newest batch processed,
the broker timestamp of the first record not yet processed (one fetch of that record, as
kafka-lag-exporter reads its time lag). So the lag keeps growing on the endpoint when
batches stop completing, where a lag computed at batch ends would freeze. A batch that
leaves lag behind wakes it (`wake`, at most every SOONEST_SECONDS), so the lag in
seconds follows the batches rather than the schedule. A broker the thread cannot reach
leaves the figures as they were (the source's own reads warn of it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from streaming_app.sources.kafka.client import REQUEST_TIMEOUT_MS, Broker, KafkaConnection
from streaming_app.sources.kafka.offsets import TopicPartition

log = logging.getLogger(__name__)

EVERY_SECONDS = 15.0  # the endpoint's schedule: about one scrape interval of most setups
SOONEST_SECONDS = 2.0  # between two readings, however often batches wake the thread


class LagWatch:
    """Reads the broker on its own schedule and hands the endpoint what it found.

    endpoint: the metrics endpoint (common/prometheus.py `Endpoint`): it gives the
    processed offsets (`processed_offsets()`) and takes what the broker says
    (`broker_positions(latest, oldest_ms)`)."""

    def __init__(
        self,
        connection: KafkaConnection,
        topics: Iterable[str],
        endpoint: Any,
        every: float = EVERY_SECONDS,
        soonest: float = SOONEST_SECONDS,
    ) -> None:
        self.connection = connection
        self.topics = tuple(topics)
        self.endpoint = endpoint
        self.every = every
        self.soonest = soonest
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._broker: Broker | None = None
        self._reader: Any = None

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
            try:
                self.once()
            except Exception as exc:  # the broker unreachable: try again next time
                log.debug("Kafka lag watch: %s", exc, exc_info=True)
                self._close()
            if self._stop.wait(self.soonest):
                return

    def once(self) -> None:
        """One reading: the latest offsets, and the oldest unprocessed record's timestamp
        of each partition that lags."""
        if self._broker is None:
            self._broker = Broker(self.connection, client_id="streaming-app-lag")
        found = self._broker.offsets(self.topics)
        processed: Mapping[TopicPartition, int] = self.endpoint.processed_offsets()
        behind = {
            tp: max(processed[tp], found.earliest.get(tp, 0))
            for tp, latest in found.latest.items()
            if tp in processed and latest > processed[tp]
        }
        self.endpoint.broker_positions(found.latest, self._timestamps(behind))

    def _timestamps(self, at: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The broker timestamp (epoch ms) of the record at each partition's offset."""
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
            )
        keyed = {KafkaTp(t, p): offset for (t, p), offset in at.items()}
        self._reader.assign(list(keyed))
        self._reader.resume(*keyed)  # paused at the last reading, once it had its record
        for tp, offset in keyed.items():
            self._reader.seek(tp, offset)
        found: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + REQUEST_TIMEOUT_MS / 1000
        while len(found) < len(keyed) and time.monotonic() < deadline:
            for tp, records in self._reader.poll(timeout_ms=500).items():
                if records and (tp.topic, tp.partition) not in found:
                    found[(tp.topic, tp.partition)] = int(records[0].timestamp)
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
