"""The lag watch's schedule: every `every` seconds, sooner when a batch wakes it, never
more often than `soonest`; a failed reading warned of once. (Its readings of a real
broker: tests/integration/test_kafka_lag_watch.py.)"""

from __future__ import annotations

import logging
import time

import pytest

from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.lag_watch import LagWatch


class CountingWatch(LagWatch):
    """Counts its readings instead of asking a broker."""

    readings: list[float]

    def once(self) -> None:
        self.readings.append(time.monotonic())


def watch(every: float, soonest: float) -> CountingWatch:
    counting = CountingWatch(KafkaConnection("127.0.0.1:9"), ["words"], None, every, soonest)
    counting.readings = []
    return counting


def wait_for(counting: CountingWatch, readings: int, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while len(counting.readings) < readings:
        assert time.monotonic() < deadline, counting.readings
        time.sleep(0.01)


def test_a_wake_reads_at_once_and_the_schedule_goes_on() -> None:
    counting = watch(every=3600, soonest=0.05)
    counting.start()
    try:
        time.sleep(0.2)
        assert counting.readings == []  # the schedule's first reading is an hour away
        woken = time.monotonic()
        counting.wake()
        wait_for(counting, 1)
        assert counting.readings[0] - woken < 1
    finally:
        counting.stop()
    assert counting._thread is not None and not counting._thread.is_alive()


def test_wakes_come_no_closer_than_soonest() -> None:
    counting = watch(every=3600, soonest=0.5)
    counting.start()
    try:
        counting.wake()
        wait_for(counting, 1)
        for _ in range(20):  # a batch a few ms apart, each leaving lag
            counting.wake()
            time.sleep(0.01)
        wait_for(counting, 2)
        time.sleep(0.2)
        first, second = counting.readings[:2]
        assert second - first >= 0.5
        assert len(counting.readings) == 2  # the twenty wakes made one more reading
    finally:
        counting.stop()


def test_stop_ends_the_thread_while_it_waits_for_the_schedule() -> None:
    counting = watch(every=3600, soonest=3600)
    counting.start()
    started = time.monotonic()
    counting.stop()
    assert time.monotonic() - started < 2
    assert counting.readings == []


class FlakyWatch(LagWatch):
    """Fails its readings while `down` is set, as a broker out of reach."""

    down = True

    def once(self) -> None:
        if self.down:
            raise ConnectionError("[Errno 111] Connection refused")


def test_a_failed_reading_is_warned_of_once_and_the_recovery_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flaky = FlakyWatch(KafkaConnection("127.0.0.1:9"), ["words"], None)
    caplog.set_level(logging.DEBUG, logger="streaming_app.sources.kafka.lag_watch")
    assert [flaky.read() for _ in range(3)] == [False, False, False]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert "Kafka lag: reading the broker failed (ConnectionError:" in warned[0].getMessage()
    flaky.down = False
    assert flaky.read() is True
    assert caplog.records[-1].getMessage() == "Kafka lag: the broker read again"
    flaky.down = True
    assert flaky.read() is False  # a new outage is warned of again
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2
