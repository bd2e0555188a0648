"""The Kafka lag's bookkeeping (common/kafka_lag.py) on an injected clock: lag in records,
in seconds two ways (interpolated from the readings; the record's own timestamp), served
from the start, the time of the last reading, and each record's timestamp read once."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streaming_app.common.kafka_lag import EndTable, KafkaLag, PartitionPosition

T0 = 1_790_000_000.0  # 2026-09, epoch seconds
KEY = ("words", 0)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def served(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    """Each sample by name and partition ("" for an unlabelled one)."""
    text = generate_latest(registry).decode()
    return {
        (s.name, s.labels.get("partition", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def book() -> tuple[KafkaLag, Clock, CollectorRegistry]:
    clock, registry = Clock(), CollectorRegistry()
    return KafkaLag(registry, clock), clock, registry


def test_the_table_interpolates_when_the_latest_offset_passed_an_offset() -> None:
    table = EndTable()
    table.add(100, 10.0)
    table.add(200, 20.0)
    table.add(200, 30.0)
    table.add(200, 40.0)  # a flat stretch: kept as its two ends
    table.add(300, 50.0)
    assert table.points == [(100, 10.0), (200, 20.0), (200, 40.0), (300, 50.0)]
    assert table.passed(149) == 15.0  # the record 149 arrived as the latest went 149 -> 150
    assert table.passed(199) == 20.0
    assert table.passed(249) == 45.0  # after the flat stretch, not during it
    assert table.passed(50) == 10.0  # older than the first reading: at least that old
    assert table.passed(300) is None  # caught up as of the newest reading
    table.add(250, 60.0)  # the partition recreated: its offsets went back
    assert table.points == [(250, 60.0)]


def test_the_table_keeps_its_ends_when_thinned_and_forgets_what_is_processed() -> None:
    table = EndTable(limit=8)
    for n in range(20):
        table.add(n * 10, float(n))
    assert len(table.points) <= 8
    assert table.points[0] == (0, 0.0) and table.points[-1] == (190, 19.0)
    table.prune(100)
    assert table.points[0][0] <= 100 < table.points[1][0]


def test_lag_seconds_grows_with_the_readers_clock_whatever_the_records_stamps() -> None:
    lag, clock, registry = book()
    lag.observe([PartitionPosition("words", 0, 100, None)])
    # A back-filled record (stamped a day ago) and a record without a timestamp (-1).
    lag.read({KEY: 100, ("words", 1): 0}, {})
    clock.now += 15
    lag.read({KEY: 160}, {KEY: (100, int((T0 - 86_400) * 1000))})
    got = served(registry)
    assert got[("streaming_app_kafka_lag_records", "0")] == 60
    assert got[("streaming_app_kafka_lag_seconds", "0")] == 14.75  # 100 passed at T0 + 0.25 s
    assert got[("streaming_app_kafka_record_age_seconds", "0")] == 86_415  # the stamp's way
    clock.now += 600  # stuck: no batch, no reading (the broker unreachable)
    assert served(registry)[("streaming_app_kafka_lag_seconds", "0")] == 614.75
    lag.read({KEY: 160}, {KEY: (100, -1)})  # the same offset: stays cached, not fetched
    assert lag.unread({KEY: 160}, {}) == {}


def test_a_record_without_a_timestamp_serves_no_age_and_seconds_still_count() -> None:
    lag, clock, registry = book()
    lag.started({KEY: 0})
    lag.read({KEY: 5}, {KEY: (0, -1)})
    clock.now += 30
    got = served(registry)
    assert ("streaming_app_kafka_record_age_seconds", "0") not in got
    assert got[("streaming_app_kafka_lag_seconds", "0")] == 30


def test_lag_is_served_from_the_start_before_the_first_batch() -> None:
    lag, clock, registry = book()
    assert ("streaming_app_kafka_lag_read_timestamp_seconds", "") not in served(registry)
    lag.started({KEY: 40})  # the first batch's start offsets, as planned
    lag.read({KEY: 90}, {})
    clock.now += 120  # the first batch never completes
    lag.read({KEY: 95}, {})
    got = served(registry)
    assert got[("streaming_app_kafka_processed_offset", "0")] == 40
    assert got[("streaming_app_kafka_lag_records", "0")] == 55
    assert got[("streaming_app_kafka_lag_seconds", "0")] == 120  # at least since the first
    assert got[("streaming_app_kafka_lag_read_timestamp_seconds", "")] == T0 + 120
    lag.started({KEY: 0})  # a start position never overrides what is known
    lag.observe([PartitionPosition("words", 0, 95, 95)])
    assert served(registry)[("streaming_app_kafka_lag_seconds", "0")] == 0


def test_each_record_is_fetched_once_while_the_app_is_stuck() -> None:
    lag, _, _ = book()
    lag.observe([PartitionPosition("words", 0, 10, 20), PartitionPosition("words", 1, 5, 5)])
    assert lag.unread({KEY: 20, ("words", 1): 5}, {}) == {KEY: 10}  # partition 1 caught up
    lag.read({KEY: 20}, {KEY: (10, 1)})
    assert lag.unread({KEY: 30}, {}) == {}
    assert lag.unread({KEY: 30}, {KEY: 12}) == {KEY: 12}  # 10 and 11 gone to retention
    lag.observe([PartitionPosition("words", 0, 25, 30)])
    assert lag.unread({KEY: 30}, {}) == {KEY: 25}


def test_a_batch_that_leaves_lag_behind_wakes_the_watch_and_so_does_a_start() -> None:
    lag, _, registry = book()
    woken: list[int] = []
    lag.on_lag(lambda: woken.append(1))
    lag.observe([PartitionPosition("words", 0, 40, 40)])
    lag.observe([PartitionPosition("words", 0, 40, None)])
    assert woken == []
    got = served(registry)
    assert got[("streaming_app_kafka_lag_seconds", "0")] == 0
    assert got[("streaming_app_kafka_record_age_seconds", "0")] == 0
    lag.observe([PartitionPosition("words", 0, 50, 80)])
    assert woken == [1]
    lag.started({("words", 0): 0, ("words", 1): 0})  # a partition new to it: read at once
    assert woken == [1, 1]
    lag.started({("words", 0): 0, ("words", 1): 0})  # nothing new: no reading
    assert woken == [1, 1]
