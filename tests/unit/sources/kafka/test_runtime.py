"""The Kafka source's driver-process state: the per-batch read statistics."""

from __future__ import annotations

from streaming_app.sources.kafka.runtime import StatsParam


def test_stats_accumulate_per_batch_and_key() -> None:
    param = StatsParam()
    total = param.zero({})
    total = param.addInPlace(total, {1000: {"records": 2, "empty": 1}})
    total = param.addInPlace(total, {1000: {"records": 3}, 2000: {"oversize": 1}})
    assert total == {1000: {"records": 5, "empty": 1}, 2000: {"oversize": 1}}
