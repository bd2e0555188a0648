"""Batch times in epoch ms, Spark durations, and per-batch figures taken once."""

from __future__ import annotations

import pytest

from streaming_app.common import per_batch
from streaming_app.common.batch_time import spark_seconds
from streaming_app.common.per_batch import remember, take_batch


def test_take_batch_pops_the_batch_and_forgets_older_ones_only() -> None:
    by_batch = {1000: "a", 2000: "b", 3000: "c", 4000: "d"}
    assert take_batch(by_batch, 3000, "none") == "c"
    assert by_batch == {4000: "d"}
    assert take_batch(by_batch, 3500, "none") == "none"
    assert by_batch == {4000: "d"}


def test_spark_seconds_truncates_back_to_the_milliseconds() -> None:
    for ms in (1, 999, 2010, 2_000_000):
        assert int(spark_seconds(ms) * 1000) == ms


def test_remember_keeps_the_newest_entries_up_to_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(per_batch, "MAX_REMEMBERED", 3)
    kept: dict[int, str] = {}
    for batch in (5, 1, 4, 2, 3):  # out of order: the lowest batch times go first
        remember(kept, batch, f"b{batch}")
    assert kept == {3: "b3", 4: "b4", 5: "b5"}
    remember(kept, 4, "again")  # a batch noted twice keeps its newest entry, no eviction
    assert kept == {3: "b3", 4: "again", 5: "b5"}
