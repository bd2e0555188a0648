"""The lag watch's schedule: every `every` seconds, sooner when a batch wakes it, never
more often than `soonest`; a failed reading warned of once. (Its readings of a real
broker: tests/integration/test_kafka_lag_watch.py.)

The schedule runs on a clock of the test's: its two events wait on that clock, so each
reading's time is exact and no test sleeps or measures the wall clock."""

from __future__ import annotations

import logging
import time

import pytest

from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.lag_watch import EVERY_SECONDS, SOONEST_SECONDS, LagWatch


class Clock:
    """Seconds that pass only when the watch waits; the wakes and the stop it will meet."""

    def __init__(self, wakes: list[float], stop_at: float) -> None:
        self.now = 0.0
        self.wakes = sorted(wakes)
        self.stop_at = stop_at
        self.consumed = 0  # wakes cleared so far

    def next_event(self, after: float) -> float:
        """The first wake (or the stop, which wakes the watch too) after `after`."""
        pending = [t for t in self.wakes[self.consumed :] if t > after] + [self.stop_at]
        return min(pending)


class WakeEvent:
    """The watch's `_wake`, on the clock: set by every wake at or before now."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def wait(self, timeout: float) -> bool:
        clock = self.clock
        if self.is_set():
            return True
        woken = clock.next_event(clock.now)
        if woken <= clock.now + timeout:
            clock.now = woken
            return True
        clock.now += timeout
        return False

    def is_set(self) -> bool:
        clock = self.clock
        due = [t for t in clock.wakes[clock.consumed :] if t <= clock.now]
        return bool(due) or clock.now >= clock.stop_at

    def clear(self) -> None:
        clock = self.clock
        while clock.consumed < len(clock.wakes) and clock.wakes[clock.consumed] <= clock.now:
            clock.consumed += 1

    def set(self) -> None:
        raise AssertionError("wakes are the clock's")


class StopEvent:
    """The watch's `_stop`, on the clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def is_set(self) -> bool:
        return self.clock.now >= self.clock.stop_at

    def wait(self, timeout: float) -> bool:
        clock = self.clock
        if clock.stop_at <= clock.now + timeout:
            clock.now = max(clock.now, clock.stop_at)
            return True
        clock.now += timeout
        return False


class CountingWatch(LagWatch):
    """Counts its readings (the clock's time of each) instead of asking a broker."""

    readings: list[float]
    clock: Clock

    def once(self) -> None:
        self.readings.append(self.clock.now)


def schedule(every: float, soonest: float, wakes: list[float], stop_at: float) -> list[float]:
    """The times of the readings a watch makes on the test's clock, run to its stop."""
    counting = CountingWatch(KafkaConnection("127.0.0.1:9"), ["words"], None, every, soonest)
    counting.readings, counting.clock = [], Clock(wakes, stop_at)
    counting._wake = WakeEvent(counting.clock)  # type: ignore[assignment]
    counting._stop = StopEvent(counting.clock)  # type: ignore[assignment]
    counting._loop()
    return counting.readings


def test_a_wake_reads_at_once_and_the_schedule_goes_on() -> None:
    # The schedule's first reading is an hour away; a wake at 10 s reads then, and the
    # schedule goes on an hour after that reading.
    readings = schedule(every=3600, soonest=0.05, wakes=[10], stop_at=8000)
    assert readings == pytest.approx([10, 3610.05, 7210.1])


def test_wakes_come_no_closer_than_soonest() -> None:
    # A batch every 10 ms, each leaving lag: one reading at the first, one more `soonest`
    # later for all the others, then the schedule.
    wakes = [0.01 * n for n in range(1, 21)]
    assert schedule(every=3600, soonest=0.5, wakes=wakes, stop_at=100) == pytest.approx(
        [0.01, 0.51]
    )


def test_no_wake_reads_on_the_schedule_alone() -> None:
    assert schedule(every=60, soonest=1, wakes=[], stop_at=200) == [60, 121, 182]


def test_by_default_a_wake_reads_within_2_s_and_the_schedule_every_15_s() -> None:
    # docs/metrics.md, streaming_app_kafka_lag_seconds: read every 15 s (after a reading's
    # 2 s pause) and within 2 s of a batch that leaves lag behind.
    readings = schedule(EVERY_SECONDS, SOONEST_SECONDS, wakes=[1, 1.5, 12], stop_at=40)
    assert readings == [1, 3, 12, 29]


def test_stop_ends_the_thread_while_it_waits_for_the_schedule() -> None:
    counting = CountingWatch(KafkaConnection("127.0.0.1:9"), ["words"], None, 3600, 3600)
    counting.readings = []
    counting.start()
    started = time.monotonic()
    counting.stop()
    assert counting._thread is not None and not counting._thread.is_alive()
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
