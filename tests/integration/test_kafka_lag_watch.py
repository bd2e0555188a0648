"""The endpoint's Kafka lag read from a real broker on its own schedule (lag_watch.py):
in records and in seconds both ways (the reader's clock, interpolated from its readings;
the record's own timestamp), with producers that back-fill and that send no timestamp,
growing while no batch completes, 0 once one has caught up, each record fetched once."""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streaming_app.common.kafka_lag import KafkaLag
from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.prometheus import Endpoint, PartitionPosition
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.lag_watch import LagWatch
from streaming_app.tools.produce import ensure_topic
from tests.integration.kafka_helpers import fresh_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
AGE_S = 3 * 3600  # how old a back-filling producer stamps its records (CreateTime)


def series(registry: object, name: str) -> dict[int, float]:
    """A partition-labelled series of a registry, by partition."""
    text = generate_latest(registry).decode()  # type: ignore[arg-type]
    return {
        int(sample.labels["partition"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def send_stamped(bootstrap: str, topic: str, partition: int, count: int, stamp_ms: int) -> None:
    """`count` records into one partition stamped `stamp_ms` (-1: no timestamp), one at a
    time (tansu gives a batch of several the offsets of one: kafka_helpers.send)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for n in range(count):
            stamp = stamp_ms if stamp_ms < 0 else stamp_ms + n
            future = producer.send(topic, f"w{n}".encode(), partition=partition, timestamp_ms=stamp)
            future.get(timeout=30)
    finally:
        producer.close()


class CountingWatch(LagWatch):
    """Counts the records each reading fetches for their timestamps."""

    fetched: list[int]

    def _timestamps(
        self, at: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], tuple[int, int]]:
        self.fetched.append(len(at))
        return super()._timestamps(at)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def batch(at_ms: int) -> BatchMetrics:
    return BatchMetrics(at_ms, 2000, 10, 100, 0, 100, None, at_ms + 100)


def test_the_lag_grows_between_batches_in_records_and_seconds_and_clears(
    kafka_bootstrap: str,
) -> None:
    connection = KafkaConnection(kafka_bootstrap)
    topic = fresh_topic("lag")
    ensure_topic(connection, topic, 2)
    # A producer that back-fills: its records stamped three hours ago.
    send_stamped(kafka_bootstrap, topic, 0, 10, int((time.time() - AGE_S) * 1000))
    endpoint = Endpoint({"source": "kafka", "sinks": "files"})
    registry = endpoint.registry
    watch = LagWatch(connection, [topic], endpoint.kafka, every=3600)  # read by hand: `once`
    try:
        watch.once()  # before any batch: the latest offsets, no lag yet (nothing processed)
        assert series(registry, "streaming_app_kafka_latest_offset") == {0: 10, 1: 0}
        assert series(registry, "streaming_app_kafka_lag_records") == {}
        # A batch processed 4 records of partition 0 and all of partition 1; then none.
        endpoint.observe(
            batch(2000),
            False,
            [PartitionPosition(topic, 0, 4, 10), PartitionPosition(topic, 1, 0, 0)],
        )
        # More arrives while no batch completes.
        send_stamped(kafka_bootstrap, topic, 0, 5, int((time.time() - 10) * 1000))
        watch.once()
        assert series(registry, "streaming_app_kafka_lag_records") == {0: 11, 1: 0}
        seconds = series(registry, "streaming_app_kafka_lag_seconds")
        assert seconds[1] == 0
        # The reader's clock: record 4 was on the broker at the first reading, no earlier
        # that this process can tell; the producer's three hours do not count.
        assert 0 < seconds[0] < 60
        age = series(registry, "streaming_app_kafka_record_age_seconds")
        assert AGE_S - 5 <= age[0] <= AGE_S + 60  # the record's own stamp: record 4's
        # A batch that caught up: the lag is 0 at once, in records and seconds.
        endpoint.observe(
            batch(4000),
            False,
            [PartitionPosition(topic, 0, 15, 15), PartitionPosition(topic, 1, 0, 0)],
        )
        assert series(registry, "streaming_app_kafka_lag_records") == {0: 0, 1: 0}
        assert series(registry, "streaming_app_kafka_lag_seconds") == {0: 0, 1: 0}
        watch.once()
        assert series(registry, "streaming_app_kafka_lag_seconds") == {0: 0, 1: 0}
        assert series(registry, "streaming_app_kafka_record_age_seconds") == {0: 0, 1: 0}
    finally:
        watch.stop()


def test_records_without_a_timestamp_serve_no_age_and_a_stuck_app_costs_no_fetch(
    kafka_bootstrap: str,
) -> None:
    from prometheus_client import CollectorRegistry

    connection = KafkaConnection(kafka_bootstrap)
    topic = fresh_topic("lag-nostamp")
    ensure_topic(connection, topic, 1)
    send_stamped(kafka_bootstrap, topic, 0, 3, -1)  # a producer that sends no timestamp
    clock, registry = Clock(), CollectorRegistry()
    lag = KafkaLag(registry, clock)
    lag.started({(topic, 0): 0})  # where the run starts: no batch has completed
    watch = CountingWatch(connection, [topic], lag, every=3600)
    watch.fetched = []
    try:
        watch.once()
        clock.now += 600  # ten minutes stuck on its first batch
        watch.once()
        watch.once()
        assert watch.fetched == [1, 0, 0]  # the record read once, not at every reading
        assert series(registry, "streaming_app_kafka_lag_records") == {0: 3}
        assert series(registry, "streaming_app_kafka_record_age_seconds") == {}  # no stamp
        assert series(registry, "streaming_app_kafka_lag_seconds") == {0: 600}
    finally:
        watch.stop()
