"""Live metrics over a real run, and down time: replayed batches stay under the rate cap."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.metrics_record import read_metrics
from tests.integration.conftest import kafka_args
from tests.integration.harness import make_text, truth, wait_for_totals
from tests.integration.kafka_helpers import fresh_topic, send

pytestmark = pytest.mark.timeout(420)
PARTITIONS = 2
RATE = 25  # records per second per partition: 50 per partition per 2 s batch
CAP = RATE * 2 * PARTITIONS  # records per batch


def test_metrics_progress_report_and_bounded_replay_after_down_time(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(3)
    topic = fresh_topic("metrics")
    metrics = tmp_path / "metrics.jsonl"
    args = kafka_args(
        dirs, kafka_bootstrap, topic,
        "--max-rate-per-partition", str(RATE), "--metrics-file", str(metrics),
    )  # fmt: skip
    first = make_text(rng, 60).splitlines()
    send(kafka_bootstrap, topic, first, partitions=PARTITIONS)
    app = start_app(*args)
    wait_for_totals(dirs["output"], truth(first), app)
    # The progress line follows the batch's last output (the sinks write first).
    app.wait_for_log(r"batch \d\d:\d\d:\d\d UTC records=\d+ processing=\d", timeout=30)
    assert app.terminate() == 0

    backlog = make_text(rng, 5 * CAP).splitlines()  # at least 5 capped batches
    send(kafka_bootstrap, topic, backlog, partitions=PARTITIONS)
    time.sleep(7)  # a few batch intervals of down time
    app = start_app(*args)
    missed = int(app.wait_for_log(r"about (\d+) missed batch intervals will be replayed").group(1))
    assert missed >= 3
    # The line after it (the recovered settings are logged in between).
    app.wait_for_log(f"each replayed batch reads at most {RATE * 2} records per partition")
    wait_for_totals(dirs["output"], truth(first + backlog), app, timeout=180)
    assert app.terminate() == 0

    batches, skipped = read_metrics(metrics)
    assert skipped == 0
    # Each batch once: a batch recomputed after the restart keeps its last line, whose
    # records are unknown (None) when its state came back from the RDD checkpoint.
    counted = [b.records for b in batches]
    assert sum(n or 0 for n in counted) == len(first) + len(backlog), counted
    assert all(n is None or n <= CAP for n in counted), counted
    assert counted.count(CAP) >= 5, counted  # the backlog, one capped batch after another
    busy = [b for b in batches if b.records]
    lags = [b.kafka_lag for b in busy if b.kafka_lag is not None]
    assert max(lags) > 0 and lags[-1] == 0, lags  # the backlog was worked off
    assert all(b.processing_ms is not None and b.processing_ms >= 0 for b in batches)

    png = tmp_path / "metrics.png"
    report = subprocess.run(
        [sys.executable, "-m", "streaming_app", "report", str(metrics), "--plot", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert f"{len(first) + len(backlog):,}" in report.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
