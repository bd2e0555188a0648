"""The endpoint's Kafka lag read from a real broker on its own schedule (lag_watch.py):
in records and in seconds, growing while no batch completes, 0 once one has caught up."""

from __future__ import annotations

import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.prometheus import Endpoint, PartitionPosition
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.lag_watch import LagWatch
from streaming_app.tools.produce import ensure_topic
from tests.integration.kafka_helpers import fresh_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
AGE_S = 120  # how old the records are made (their broker timestamp)


def series(endpoint: Endpoint, name: str) -> dict[int, float]:
    """A partition-labelled series of the endpoint, by partition."""
    text = generate_latest(endpoint.registry).decode()
    return {
        int(sample.labels["partition"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def send_aged(bootstrap: str, topic: str, partition: int, count: int, age_s: float) -> None:
    """`count` records into one partition, stamped `age_s` seconds ago (CreateTime), one
    at a time (tansu gives a batch of several the offsets of one: kafka_helpers.send)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    stamp = int((time.time() - age_s) * 1000)
    try:
        for n in range(count):
            future = producer.send(
                topic, f"w{n}".encode(), partition=partition, timestamp_ms=stamp + n
            )
            future.get(timeout=30)
    finally:
        producer.close()


def batch(at_ms: int) -> BatchMetrics:
    return BatchMetrics(at_ms, 2000, 10, 100, 0, 100, None, at_ms + 100)


def test_the_lag_grows_between_batches_in_records_and_seconds_and_clears(
    kafka_bootstrap: str,
) -> None:
    connection = KafkaConnection(kafka_bootstrap)
    topic = fresh_topic("lag")
    ensure_topic(connection, topic, 2)
    send_aged(kafka_bootstrap, topic, 0, 10, AGE_S)
    endpoint = Endpoint({"source": "kafka", "sinks": "files"})
    watch = LagWatch(connection, [topic], endpoint, every=3600)  # read by hand: `once`
    try:
        watch.once()  # before any batch: the latest offsets, no lag yet (nothing processed)
        assert series(endpoint, "streaming_app_kafka_latest_offset") == {0: 10, 1: 0}
        assert series(endpoint, "streaming_app_kafka_lag_records") == {}
        # A batch processed 4 records of partition 0 and all of partition 1; then none.
        endpoint.observe(
            batch(2000),
            False,
            [PartitionPosition(topic, 0, 4, 10), PartitionPosition(topic, 1, 0, 0)],
        )
        send_aged(kafka_bootstrap, topic, 0, 5, 10)  # more arrives while no batch completes
        watch.once()
        assert series(endpoint, "streaming_app_kafka_lag_records") == {0: 11, 1: 0}
        seconds = series(endpoint, "streaming_app_kafka_lag_seconds")
        assert seconds[1] == 0
        assert AGE_S - 5 <= seconds[0] <= AGE_S + 30  # the age of record 4, not of the newest
        # A batch that caught up: the lag is 0 at once, in records and seconds.
        endpoint.observe(
            batch(4000),
            False,
            [PartitionPosition(topic, 0, 15, 15), PartitionPosition(topic, 1, 0, 0)],
        )
        assert series(endpoint, "streaming_app_kafka_lag_records") == {0: 0, 1: 0}
        assert series(endpoint, "streaming_app_kafka_lag_seconds") == {0: 0, 1: 0}
        watch.once()
        assert series(endpoint, "streaming_app_kafka_lag_seconds") == {0: 0, 1: 0}
    finally:
        watch.stop()
