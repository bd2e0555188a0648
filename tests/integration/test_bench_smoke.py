"""The benchmark harness works (tiny sizes): CI checks the harness, not the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]


def test_bench_smoke_runs_and_reports_every_figure(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--smoke", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "results.json").read_text())
    throughput, recovery = figures["throughput"], figures["recovery"]
    assert throughput["baseline_words_per_s"] > 0 and throughput["app_words_per_s"] > 0
    assert throughput["ratio"] > 0 and throughput["batches"] >= 1
    assert len(recovery["first_batch_s"]) == recovery["runs"] == 1
    assert 0 < recovery["first_batch_median_s"] <= recovery["caught_up_median_s"]
    assert "| **ratio app / baseline** |" in result.stdout
