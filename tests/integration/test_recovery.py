"""kill -9 of the driver and its JVM, twice in a row: nothing lost, nothing doubled."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for_totals

pytestmark = pytest.mark.timeout(480)


def test_kill_9_twice_then_totals_equal_ground_truth(dirs: dict[str, Path], start_app: Any) -> None:
    rng = random.Random(2026)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, rng.randint(20, 60)))
        drop_file(dirs["input"], name, texts[-1].encode())

    app = start_app(*files_args(dirs))
    app.wait_for_log(r"Started new streaming context")
    add("r1-a.txt")
    wait_for_totals(dirs["output"], truth(texts), app)
    for kill in range(2):
        # Input lands just before the kill, so the kill may hit a batch mid-way.
        add(f"r{kill + 1}-b.txt")
        time.sleep(rng.uniform(0.2, 2.5))
        app.kill9()
        add(f"r{kill + 1}-while-down.txt")
        app = start_app(*files_args(dirs))
        app.wait_for_log(r"Recovered streaming context from checkpoint .* at batch_time_ms=\d+")
        assert "Creating new context" not in app.log(), "the factory ran on recovery"
        assert "Started new streaming context" not in app.log()
        add(f"r{kill + 2}-a.txt")
        wait_for_totals(dirs["output"], truth(texts), app)
    # Some more batches run: a replay would show as doubled totals now.
    time.sleep(3)
    wait_for_totals(dirs["output"], truth(texts), app, timeout=5)
    assert app.terminate() == 0
