"""Spark's metadata checkpoints watched: a completed batch that they fell behind counts."""

from __future__ import annotations

import logging

import pytest

from streaming_app.common.prometheus import start_endpoint, stop_endpoint
from streaming_app.dstream.checkpoint_watch import LAG_BATCHES, CheckpointWatch
from tests.unit.common.test_prometheus import INFO, samples

CHECKPOINT = ("streaming_app_failures_total", (("operation", "checkpoint"),))
BATCH_MS = 2000


def names(*times: int) -> list[str]:
    return ["receivedBlockMetadata", "0f1e2d3c-aaaa-bbbb-cccc-000000000000"] + [
        name for t in times for name in (f"checkpoint-{t}", f"checkpoint-{t}.bk")
    ]


def test_batches_whose_checkpoints_are_written_count_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        listing = names(10_000, 12_000)
        watch = CheckpointWatch(lambda: listing, BATCH_MS)
        # Its own file, its predecessor's, or up to LAG_BATCHES intervals behind: written.
        for batch in (12_000, 14_000, 12_000 + LAG_BATCHES * BATCH_MS):
            assert not watch.after_batch(batch)
        assert samples(served)[CHECKPOINT] == 0
        assert not caplog.records
    finally:
        stop_endpoint()


def test_each_batch_the_checkpoints_fell_behind_counts_once_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    served = start_endpoint("127.0.0.1", 0, INFO)
    listing = names(10_000)
    try:
        watch = CheckpointWatch(lambda: listing, BATCH_MS)
        with caplog.at_level(logging.INFO, logger="streaming_app.dstream.checkpoint_watch"):
            late = 10_000 + (LAG_BATCHES + 1) * BATCH_MS
            assert [watch.after_batch(t) for t in (late, late + BATCH_MS)] == [True, True]
            assert samples(served)[CHECKPOINT] == 2
            listing.extend(names(late + BATCH_MS))  # written again
            assert not watch.after_batch(late + 2 * BATCH_MS)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "completed without a Spark checkpoint (the newest is of 10000" in warnings[0]
        assert "written again" in caplog.records[-1].getMessage()
    finally:
        stop_endpoint()


def test_no_checkpoint_at_all_or_a_listing_that_fails_counts() -> None:
    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        assert CheckpointWatch(lambda: names(), BATCH_MS).after_batch(10_000)

        def broken() -> list[str]:
            raise OSError("Input/output error")

        assert CheckpointWatch(broken, BATCH_MS).after_batch(10_000)
        assert samples(served)[CHECKPOINT] == 2
    finally:
        stop_endpoint()
