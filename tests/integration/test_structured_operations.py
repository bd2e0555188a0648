"""`run --engine structured`, operated as the DStream engine is: the metrics file and the
progress line (one record per micro-batch, read back by `streaming-app report`), and the
checkpoint guard (a changed guarded setting exits 3 and leaves the checkpoint as it was;
a compatible change recovers)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.metrics_record import read_metrics
from streaming_app.recovery.metadata import STRUCTURED_METADATA_FILE
from tests.integration.harness import drop_file, make_text, truth, wait_for, wait_for_totals
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED
from tests.integration.test_structured_engine import structured_args

pytestmark = pytest.mark.timeout(300)

PROGRESS = r"batch (\d\d:\d\d:\d\d) UTC records=(\d+) processing=\d+\.\d\ds"


def committed_batches(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def recorded(metrics: Path, checkpoint: Path) -> bool:
    """Whether the metrics file has a record of every micro-batch committed so far."""
    try:
        ids = {json.loads(line)["batch_id"] for line in metrics.read_text().splitlines()}
    except (OSError, ValueError):  # not written yet, or a line half written
        return False
    committed = set(committed_batches(checkpoint))
    return bool(committed) and committed <= ids


def offsets_timestamp(checkpoint: Path, batch_id: int) -> int:
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    return int(json.loads(lines[1])["batchTimestampMs"])


def test_one_metrics_record_per_micro_batch_and_the_report(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path
) -> None:
    rng = random.Random(7)
    metrics = tmp_path / "metrics.jsonl"
    app = start_app(*structured_args(dirs, "--metrics-file", str(metrics)))
    app.wait_for_log(QUERY_STARTED)
    texts = []
    for i in range(4):
        texts.append(make_text(rng, 20 + 10 * i))
        drop_file(dirs["input"], f"m{i}.txt", texts[-1].encode())
        app.wait_for_log(rf"batch_id={i} batch_time_ms=\d+: \d+ totals changed", timeout=120)
    wait_for_totals(dirs["output"], truth(texts), app)
    # The last micro-batch's progress event follows its commit.
    wait_for(
        "a record of each micro-batch", partial(recorded, metrics, dirs["checkpoint"]), 30, app
    )
    assert app.terminate() == 0

    ckpt = dirs["checkpoint"]
    batches, skipped = read_metrics(metrics)
    assert skipped == 0
    raw = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["batch_id"] for r in raw] == committed_batches(ckpt) == [0, 1, 2, 3]
    lines = [len(t.splitlines()) for t in texts]
    for batch, n in zip(batches, lines, strict=True):
        assert batch.engine == "structured"
        assert batch.records == n  # numInputRows: the lines of the file it read
        assert batch.batch_time_ms == offsets_timestamp(ckpt, batch.batch_id or 0)
        assert batch.batch_interval_ms == 1000
        assert batch.processing_ms is not None and 0 < batch.processing_ms < 120_000
        assert batch.scheduling_delay_ms is not None and batch.scheduling_delay_ms >= 0
        assert batch.total_delay_ms == batch.scheduling_delay_ms + batch.processing_ms
        assert batch.kafka_lag is None
        assert batch.batch_time_ms <= batch.completed_ms < batch.batch_time_ms + 180_000
    progress = re.findall(PROGRESS, app.log())
    assert [int(n) for _, n in progress] == lines, progress

    report = subprocess.run(
        [sys.executable, "-m", "streaming_app", "report", str(metrics)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert "batches           4" in report.stdout
    assert "engine            structured" in report.stdout
    assert f"records           {sum(lines):,}" in report.stdout


def files_of(checkpoint: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(checkpoint)): p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()
    }


def test_a_changed_guarded_setting_exits_3_and_leaves_the_checkpoint(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path
) -> None:
    rng = random.Random(11)
    texts = [make_text(rng, 20)]
    first = start_app(*structured_args(dirs))
    first.wait_for_log(QUERY_STARTED)
    drop_file(dirs["input"], "g0.txt", texts[0].encode())
    wait_for_totals(dirs["output"], truth(texts), first)
    assert first.terminate() == 0
    ckpt = dirs["checkpoint"]
    record = json.loads((ckpt / STRUCTURED_METADATA_FILE).read_text())
    assert record["engine"] == "structured" and record["settings"]["source"] == "files"
    before = files_of(ckpt)

    other = tmp_path / "other-input"
    other.mkdir()
    moved = structured_args(dirs)  # the same command line, another input directory
    moved[moved.index("--input-dir") + 1] = str(other)
    refused = start_app(*moved)
    assert refused.wait(timeout=120) == 3
    errors = [line for line in refused.log().splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, refused.log()[-3000:]
    assert f"input_dir {dirs['input']} -> {other}" in errors[0]
    assert "run with the settings that wrote it" in errors[0]
    assert "Traceback" not in refused.log()
    assert files_of(ckpt) == before

    # Compatible changes (trigger interval, another sink) recover and go on counting.
    texts.append(make_text(rng, 20))
    drop_file(dirs["input"], "g1.txt", texts[1].encode())
    again = start_app(*structured_args(dirs, "--batch-interval", "2", "--sink", "console"))
    again.wait_for_log(QUERY_RECOVERED)
    wait_for_totals(dirs["output"], truth(texts), again)
    assert again.terminate() == 0


# `slow` since 2026-11-30, in the rotating shares (to keep CI within its time). In the
# `not slow` suite: the structured lag, test_prometheus_kafka.py's.
@pytest.mark.slow
def test_kafka_lag_is_worked_off_micro_batch_by_micro_batch(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    from tests.integration.kafka_helpers import fresh_topic, send
    from tests.integration.test_structured_kafka import structured_kafka_args

    topic = fresh_topic("smetrics")
    sent = make_text(random.Random(31), 600).splitlines()
    send(kafka_bootstrap, topic, sent, partitions=3)
    metrics = tmp_path / "metrics.jsonl"
    # 30 records per second per partition, 2 s micro-batches: at most 180 per micro-batch.
    args = structured_kafka_args(
        dirs, kafka_bootstrap, topic, "--max-rate-per-partition", "30",
        "--metrics-file", str(metrics),
    )  # fmt: skip
    app = start_app(*args)
    wait_for_totals(dirs["output"], truth(sent), app, timeout=180)
    # The last micro-batch's progress event follows its commit.
    wait_for(
        "a record of each micro-batch", partial(recorded, metrics, dirs["checkpoint"]), 30, app
    )
    assert app.terminate() == 0

    batches, skipped = read_metrics(metrics)
    assert skipped == 0
    busy = [b for b in batches if b.records]
    assert sum(b.records or 0 for b in busy) == len(sent)
    assert all((b.records or 0) <= 180 for b in busy), busy
    lags = [b.kafka_lag for b in busy]
    # Each micro-batch's lag is what the broker had beyond its end: the backlog shrinks to 0.
    assert None not in lags and lags[0] == len(sent) - (busy[0].records or 0), lags
    assert lags == sorted(lags, reverse=True) and lags[-1] == 0, lags
    assert re.search(
        r"records=\d+ processing=\S+ scheduling_delay=\S+ total_delay=\S+ kafka_lag=\d+", app.log()
    )
