"""The Kafka lag's bookkeeping on the driver: positions per partition, lag in records and seconds.

Engine-neutral, pure logic (no Spark, no broker). Three sources feed it: the batches
(`observe`: what each one processed, and the broker's latest offset when it was planned),
where a run starts (`started`: the offsets its first batch reads from, so that lag is
served before the first batch completes), and the lag watch's readings of the broker
(`read`, sources/kafka/lag_watch.py). It serves its series itself, computed at each scrape
(a prometheus_client collector), so that lag in seconds keeps growing between readings
while nothing is processed. Lag in seconds comes two ways, as the two usual exporters do:

- `streaming_app_kafka_lag_seconds`, kafka-lag-exporter's way: each reading adds a point
  (latest offset, time of the reading, this process's clock) to a partition's table; the
  time at which the latest offset passed the processed one is interpolated between the
  two points around it, and the lag is now minus that time. A processed offset older than
  the table's first point is at least as old as that point (a lower bound, the case of a
  start far behind). No record timestamp is read: producers' clocks cannot move it.
- `streaming_app_kafka_record_age_seconds`, klag-exporter's way: now minus the Kafka
  timestamp of the oldest record not yet processed (the producer's clock under
  CreateTime, the broker's under LogAppendTime); absent for a record without one (-1).

Each record's timestamp is read once (`unread`): the watch fetches a record only when a
partition's first unprocessed offset changed, so a stuck app costs no fetches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

Key = tuple[str, int]  # (topic, partition)

PREFIX = "streaming_app"
TABLE_POINTS = 64  # per partition: thinned (every second point) when full, the ends kept


@dataclass(frozen=True)
class PartitionPosition:
    """A Kafka partition after a batch: the next offset to process, and the broker's latest
    when the batch was planned (None if unknown, as for a replayed batch)."""

    topic: str
    partition: int
    processed: int
    latest: int | None


class EndTable:
    """A partition's latest offsets as read at known times (kafka-lag-exporter's lookup
    table): offsets and times both rising, a flat stretch kept as its two ends."""

    def __init__(self, limit: int = TABLE_POINTS) -> None:
        self.limit = max(limit, 3)
        self.points: list[tuple[int, float]] = []  # (latest offset, seconds)

    def add(self, offset: int, at: float) -> None:
        """A reading: the latest offset was `offset` at `at`."""
        points = self.points
        if points:
            last_offset, last_at = points[-1]
            if at <= last_at:
                return  # out of order
            if offset < last_offset:
                points.clear()  # the partition was recreated: start over
            elif offset == last_offset and len(points) > 1 and points[-2][0] == offset:
                points[-1] = (offset, at)  # a flat stretch: move its right end
                return
        points.append((offset, at))
        if len(points) > self.limit:
            self.points = [points[0], *points[1:-1:2], points[-1]]

    def prune(self, processed: int) -> None:
        """Forget the points no lookup at `processed` or later needs (all but the last at
        or below it)."""
        below = [i for i, (offset, _) in enumerate(self.points) if offset <= processed]
        if len(below) > 1:
            del self.points[: below[-1]]

    def passed(self, offset: int) -> float | None:
        """When the latest offset passed `offset` (the record at `offset` was appended):
        interpolated between the readings around it; the first reading's time if it is
        older than that; None when the newest reading had not passed it (caught up)."""
        points = self.points
        if not points or offset >= points[-1][0]:
            return None
        target = offset + 1  # the latest offset once that record is on the broker
        if target <= points[0][0]:
            return points[0][1]
        for (left, left_at), (right, right_at) in pairwise(points):
            if left < target <= right:
                return left_at + (target - left) * (right_at - left_at) / (right - left)
        return points[-1][1]  # not reached: the newest point is past `offset`


class KafkaLag:
    """The driver's Kafka positions and lag per partition, served as Prometheus series."""

    def __init__(self, registry: Any = None, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock  # epoch seconds: the readings' times and "now" at a scrape
        self._lock = threading.Lock()
        self._processed: dict[Key, int] = {}
        self._latest: dict[Key, int] = {}
        self._ends: dict[Key, EndTable] = {}
        # The first unprocessed record's offset and Kafka timestamp (ms; None: it has none).
        self._stamps: dict[Key, tuple[int, int | None]] = {}
        self._read_at: float | None = None  # the last successful reading of the broker
        self._on_lag: list[Callable[[], None]] = []
        if registry is not None:
            registry.register(self)

    def on_lag(self, callback: Callable[[], None]) -> None:
        """Call `callback` after each batch that leaves a partition lagging (the lag watch
        reads again: the first unprocessed record moved on)."""
        self._on_lag.append(callback)

    def started(self, positions: Mapping[Key, int]) -> None:
        """Where the run starts (its first batch's start offsets): the processed offsets of
        the partitions no batch has reported yet (the lag watch then reads at once)."""
        with self._lock:
            new = positions.keys() - self._processed.keys()
            for key, offset in positions.items():
                self._processed.setdefault(key, offset)
        if new:
            for callback in self._on_lag:
                callback()

    def observe(self, partitions: Iterable[PartitionPosition]) -> None:
        """A completed batch's positions."""
        lagging = False
        with self._lock:
            for position in partitions:
                key = (position.topic, position.partition)
                self._processed[key] = position.processed
                if position.latest is not None:
                    self._latest[key] = max(self._latest.get(key, 0), position.latest)
                if key in self._ends:
                    self._ends[key].prune(position.processed)
                lagging = lagging or self._latest.get(key, 0) > position.processed
        if lagging:
            for callback in self._on_lag:
                callback()

    def processed_offsets(self) -> dict[Key, int]:
        """Per partition, the next offset to process (after the newest batch, or where the
        run starts)."""
        with self._lock:
            return dict(self._processed)

    def unread(self, latest: Mapping[Key, int], earliest: Mapping[Key, int]) -> dict[Key, int]:
        """The records whose timestamp a reading must fetch: each lagging partition's first
        unprocessed offset (or its earliest, past retention), unless already read."""
        with self._lock:
            wanted = {
                key: max(self._processed[key], earliest.get(key, 0))
                for key, end in latest.items()
                if key in self._processed and end > self._processed[key]
            }
            return {
                key: offset
                for key, offset in wanted.items()
                if self._stamps.get(key, (None, None))[0] != offset
            }

    def read(self, latest: Mapping[Key, int], stamps: Mapping[Key, tuple[int, int]]) -> None:
        """A successful reading of the broker, now: each partition's latest offset, and
        the (offset, Kafka timestamp in ms) of the records fetched (a timestamp below 0:
        the record has none)."""
        with self._lock:
            now = self._clock()
            self._read_at = now
            for key, offset in latest.items():
                self._latest[key] = max(self._latest.get(key, 0), offset)
                table = self._ends.setdefault(key, EndTable())
                table.add(offset, now)
                if key in self._processed:
                    table.prune(self._processed[key])
            for key, (offset, stamp_ms) in stamps.items():
                self._stamps[key] = (offset, stamp_ms if stamp_ms >= 0 else None)

    def collect(self) -> Iterator[Any]:
        """The series, as of now (prometheus_client's collector protocol)."""
        from prometheus_client.core import GaugeMetricFamily

        labels = ["topic", "partition"]
        processed = GaugeMetricFamily(
            f"{PREFIX}_kafka_processed_offset",
            "Next offset to process in a partition, after the newest batch (before the first "
            "batch: where the run starts)",
            labels=labels,
        )
        latest = GaugeMetricFamily(
            f"{PREFIX}_kafka_latest_offset",
            "The broker's latest offset of a partition: read by the endpoint on its own "
            "schedule, or when the newest batch was planned if that is newer",
            labels=labels,
        )
        records = GaugeMetricFamily(
            f"{PREFIX}_kafka_lag_records",
            "Records on the broker beyond what the newest batch processed, per partition",
            labels=labels,
        )
        seconds = GaugeMetricFamily(
            f"{PREFIX}_kafka_lag_seconds",
            "How long ago the broker's latest offset passed the processed one, by the app's "
            "clock (interpolated between the endpoint's readings of the latest offsets, as "
            "kafka-lag-exporter does; no record timestamp); 0 when caught up",
            labels=labels,
        )
        age = GaugeMetricFamily(
            f"{PREFIX}_kafka_record_age_seconds",
            "Age of the oldest record not yet processed by its own Kafka timestamp (as "
            "klag-exporter does: the producer's clock under CreateTime, the broker's under "
            "LogAppendTime); 0 when caught up; absent for a record without a timestamp",
            labels=labels,
        )
        read = GaugeMetricFamily(
            f"{PREFIX}_kafka_lag_read_timestamp_seconds",
            "When the endpoint last read the broker's offsets for the lag (epoch seconds; "
            "absent before the first reading)",
        )
        with self._lock:
            now = self._clock()
            for key in sorted(self._processed.keys() | self._latest.keys()):
                value = [key[0], str(key[1])]
                done, end = self._processed.get(key), self._latest.get(key)
                if done is not None:
                    processed.add_metric(value, done)
                if end is not None:
                    latest.add_metric(value, end)
                if done is None or end is None:
                    continue
                records.add_metric(value, max(0, end - done))
                if end <= done:
                    seconds.add_metric(value, 0)
                    age.add_metric(value, 0)
                    continue
                stamp = self._stamps.get(key)
                if stamp is not None and stamp[1] is not None:
                    age.add_metric(value, max(0.0, now - stamp[1] / 1000))
                table = self._ends.get(key)
                if table is not None and table.points:
                    passed = table.passed(done)
                    seconds.add_metric(value, 0 if passed is None else max(0.0, now - passed))
            if self._read_at is not None:
                read.add_metric([], self._read_at)
        yield from (processed, latest, records, seconds, age, read)
