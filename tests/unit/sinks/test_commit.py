"""The commit protocol: a batch is committed only when every sink wrote it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.unit.sources.kafka.test_planner import settings


def test_a_batch_whose_sink_failed_is_not_committed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from datetime import datetime

    from streaming_app.sinks.commit import commit_batch, mark_written, take_written

    batch_time = datetime.fromtimestamp(1_700_000_000)
    mark_written(1_700_000_000_000, "console")  # the files sink failed: never marked
    mark_written(1_699_999_999_000, "files")  # an older batch: forgotten with it
    with caplog.at_level(logging.WARNING):
        commit_batch(batch_time, None, settings(tmp_path), ("files", "console"))  # type: ignore[arg-type]
    assert "batch_time_ms=1700000000000: not committed: sink(s) files did not" in caplog.text
    assert not (tmp_path / "commits").exists()
    assert take_written(1_699_999_999_000) == set()
