"""The benchmark harness works (tiny sizes): CI checks the harness, not the figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)
ROOT = Path(__file__).resolve().parents[2]


def test_bench_smoke_runs_and_reports_every_figure(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--smoke", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "results.json").read_text())
    throughput, recovery = figures["throughput"], figures["recovery"]
    assert throughput["baseline_words_per_s"] > 0
    tried = throughput["tried"]
    assert [t["batch_lines"] for t in tried] == [400, 800]
    assert all(t["batches"] >= 1 and t["words_per_s"] > 0 for t in tried)
    if tried[0]["keeps_up"]:  # tiny batches keep up, unless CI is loaded
        assert throughput["sustained_words_per_s"] > 0 and throughput["ratio"] > 0
    assert len(recovery["first_batch_s"]) == recovery["runs"] == 1
    assert 0 < recovery["first_batch_median_s"] <= recovery["caught_up_median_s"]
    # Smoke runs only the app as it ships; both state layouts run in state_of_keys.
    assert [v["ratio"] > 0 for v in throughput["variants"]] == [True]
    assert throughput["baseline_python_crc_words_per_s"] > 0
    growth = figures["state_growth"]["1000"]
    assert growth["keys_at_end"] > 0 and len(growth["layouts"]) == 1
    keys = figures["state_of_keys"]
    assert keys["keys"] == 2000 and len(keys["variants"]) == 2
    for variant in keys["variants"]:
        assert variant["batches"] >= 1 and variant["processing_s"] > 0
        # Every process of the app was found and measured.
        assert min(variant[k] for k in ("driver_mib", "jvm_mib", "largest_worker_mib")) > 0
        assert variant["workers_together_mib"] > 0
    per_line = figures["per_line"]
    steps = ("baseline", "poll", "read", "read_count_old", "read_count")
    assert min(per_line[step] for step in steps) > 0
    assert per_line["broker_cpu"] >= 0  # the smoke's tansu is local: its CPU is found
    assert all(t["runs"] == 1 and len(t["runs_processing_s"]) == 1 for t in tried)
    # A checkpoint every 2 batches: the batches that wrote one are told from the others.
    cost = figures["checkpoint_cost"]["2"]
    assert cost["runs"] == 1 and cost["mean_processing_s"] > 0
    assert cost["written_s"] > 0 and cost["others_s"] > 0
    assert cost["extra_s"] == pytest.approx(cost["written_s"] - cost["others_s"], abs=0.002)
    assert cost["runs_within_loss_pct"] == [cost["within_loss_pct"]] != [None]
    peer = figures["peer"]
    assert peer["streaming_app"]["median_words_per_s"] > 0
    assert peer["structured"]["median_words_per_s"] > 0 and peer["ratio"] > 0
    for row in (
        "| **ratio app / baseline** |",
        "| **ratio streaming_app / Structured** |",
        "| + state in 64 buckets, a batch merged into it in one shuffle (the defaults now) |",
        "Python workers together",
        "**Per line, in one process**",
        "extra per checkpoint | loss within the run (each run) |",
    ):
        assert row in result.stdout, row  # fmt: skip


def test_sink_pass_runs_both_paths_and_they_agree() -> None:
    # The script exits non-zero if the top 10 through a totals stream and in the sink's
    # own job differ.
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "sink_pass.py"), "--keys", "2000", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| state of 2,000 keys in 64 buckets |" in result.stdout
    assert "| top 10 in the sink's own job (after) |" in result.stdout
