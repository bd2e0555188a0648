"""Batch times in epoch ms, Spark durations, and per-batch figures taken once."""

from __future__ import annotations

from streaming_app.common.batch_time import spark_seconds, take_batch


def test_take_batch_pops_the_batch_and_forgets_older_ones_only() -> None:
    by_batch = {1000: "a", 2000: "b", 3000: "c", 4000: "d"}
    assert take_batch(by_batch, 3000, "none") == "c"
    assert by_batch == {4000: "d"}
    assert take_batch(by_batch, 3500, "none") == "none"
    assert by_batch == {4000: "d"}


def test_spark_seconds_truncates_back_to_the_milliseconds() -> None:
    for ms in (1, 999, 2010, 2_000_000):
        assert int(spark_seconds(ms) * 1000) == ms
