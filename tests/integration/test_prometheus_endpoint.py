"""The driver's Prometheus endpoint, both engines: the same numbers as the metrics file,
batch by batch (batches, records, words, the state's keys, processing time), and the words
and keys those of the input."""

from __future__ import annotations

import random
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming_app.common.metrics_record import BatchMetrics, read_metrics
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for_totals
from tests.integration.log_lines import STARTED

pytestmark = pytest.mark.timeout(300)

_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def scrape(port: int, labelled: bool = False) -> dict[str, float]:
    """The unlabelled samples of the app's endpoint, by name (with `labelled`, all of them,
    by name and labels: `name{label=value,...}`)."""
    with _LOOPBACK.open(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        s.name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
                  if s.labels else ""): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if labelled or not s.labels
    }  # fmt: skip


def recorded(metrics: Path) -> list[BatchMetrics]:
    """The metrics file's batches so far ([] before the first)."""
    return read_metrics(metrics)[0] if metrics.exists() else []


def same_numbers(served: dict[str, float], batches: list[BatchMetrics]) -> bool:
    """Whether the scrape counts exactly these batches."""
    return (
        served["streaming_app_batches_total"] == len(batches)
        and served["streaming_app_records_total"] == sum(b.records or 0 for b in batches)
        and served["streaming_app_last_batch_timestamp_seconds"] == batches[-1].batch_time_ms / 1000
        and served["streaming_app_batch_processing_seconds_sum"]
        == pytest.approx(sum((b.processing_ms or 0) / 1000 for b in batches))
        and served["streaming_app_words_total"] == sum(b.words or 0 for b in batches)
        and served["streaming_app_state_keys"] == batches[-1].state_keys
    )


@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_the_endpoint_serves_what_the_metrics_file_records_batch_by_batch(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path, engine: str
) -> None:
    rng = random.Random(40)
    texts: list[str] = []
    metrics = tmp_path / "metrics.jsonl"
    app = start_app(
        *files_args(dirs, "--engine", engine),
        "--batch-interval", "2", "--checkpoint-interval", "10", "--snapshot-interval", "10",
        "--metrics-file", str(metrics), "--metrics-port", "0",
    )  # fmt: skip
    port = app.metrics_port()
    app.wait_for_log(STARTED[engine])
    compared = 0
    for n in range(4):
        texts.append(make_text(rng, 10 + n))
        drop_file(dirs["input"], f"f{n}.txt", texts[-1].encode())
        wait_for_totals(dirs["output"], truth(texts), app)
        # The recorder appends a batch's line, then updates the series: a scrape between
        # two reads of the file that agree equals them (or, caught in between, the one
        # before: then look again), once the file has the batch of this input (the
        # structured engine's listener runs after the micro-batch's output).
        deadline = time.monotonic() + 60
        while True:
            before = recorded(metrics)
            served = scrape(port)
            after = recorded(metrics)
            lines = sum(len(t.splitlines()) for t in texts)
            counted = sum(b.records or 0 for b in before)
            words = sum(b.words or 0 for b in before)
            expected = truth(texts)
            if (
                before == after
                and (counted, words) == (lines, sum(expected.values()))
                and before[-1].state_keys == len(expected)
                and same_numbers(served, before)
            ):
                break
            assert time.monotonic() < deadline, (served, before[-2:], after[-2:])
            time.sleep(0.3)
        compared += 1
    assert compared == 4
    # Every batch's record says how many words it counted and the state's keys after it.
    assert all(b.words is not None and b.state_keys is not None for b in recorded(metrics))
    assert served["streaming_app_records_total"] == sum(len(t.splitlines()) for t in texts)
    assert served["streaming_app_falling_behind"] == 0
    assert served["process_start_time_seconds"] > 0
    # The operations' last successes: Spark's checkpoint (every 10 s), a snapshot, the sink.
    # The four inputs can all be counted before the first checkpoint is due (CI of e69bdc0
    # did it in under 10 s): wait for it.
    operations = ("checkpoint", "snapshot", "files")
    stamps = [f"streaming_app_last_success_timestamp_seconds{{operation={o}}}" for o in operations]
    deadline = time.monotonic() + 60
    while not all(s in (done := scrape(port, labelled=True)) for s in stamps):
        assert time.monotonic() < deadline, done
        time.sleep(0.5)
    for operation in operations:
        stamp = done[f"streaming_app_last_success_timestamp_seconds{{operation={operation}}}"]
        assert time.time() - 120 < stamp <= time.time(), operation
    assert done["streaming_app_operation_duration_seconds_count{operation=files}"] >= 4
    # What StreamingAppCheckpointTooOld compares them with: every micro-batch commits.
    every = {"dstream": 10, "structured": 2}[engine]
    assert done["streaming_app_checkpoint_interval_seconds"] == every
    assert app.terminate() == 0, app.log()[-3000:]
