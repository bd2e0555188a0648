"""The pure helpers of the sinks: batch time to epoch ms, and the console line."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from streaming_app.common.batch_time import epoch_ms, spark_seconds
from streaming_app.sinks.console import console_line


@pytest.fixture(params=["UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"])
def local_tz(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with the process's local time zone set to each of a few zones."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    if request.param != "UTC":
        assert (time.timezone, time.altzone) != (0, 0), "zone data missing"
    yield request.param
    monkeypatch.undo()
    time.tzset()


def utc_ms(year: int, month: int, day: int, hour: int, minute: int) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=timezone.utc).timestamp() * 1000)


@pytest.mark.parametrize(
    "ms",
    [
        0,
        1_763_805_601_000,
        1_763_805_601_123,
        utc_ms(2025, 3, 9, 7, 30),  # New York: just after the spring-forward gap
        utc_ms(2025, 11, 2, 5, 30),  # New York: 01:30 EDT, first pass of the repeated hour
        utc_ms(2025, 11, 2, 6, 30),  # New York: 01:30 EST, second pass of the repeated hour
        utc_ms(2025, 4, 5, 14, 45),  # Lord Howe: inside its repeated half hour
    ],
)
def test_epoch_ms_of_naive_local_batch_time_round_trips(local_tz: str, ms: int) -> None:
    batch_time = datetime.fromtimestamp(ms / 1000)  # what PySpark hands to foreachRDD
    assert batch_time.tzinfo is None
    assert epoch_ms(batch_time) == ms


def test_console_line_format() -> None:
    line = console_line(datetime(2026, 11, 22, 10, 0, 1), [("a", 3), ("b", 1)])
    assert line == "Counts at time 2026-11-22 10:00:01 [('a', 3), ('b', 1)]"


def test_console_line_drops_sub_seconds_and_shows_empty_batches() -> None:
    line = console_line(datetime(2026, 1, 2, 3, 4, 5, 999_000), [])
    assert line == "Counts at time 2026-01-02 03:04:05 []"


@pytest.mark.parametrize("milliseconds", [1, 999, 1000, 2010, 4020, 8030, 12345, 86_400_000])
def test_spark_seconds_survive_pysparks_truncation(milliseconds: int) -> None:
    # PySpark turns seconds into a Duration with int(seconds * 1000).
    assert int(spark_seconds(milliseconds) * 1000) == milliseconds


def test_spark_seconds_for_every_interval_up_to_two_minutes() -> None:
    assert all(int(spark_seconds(ms) * 1000) == ms for ms in range(1, 120_001))
