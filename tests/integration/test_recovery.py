"""kill -9 of the driver and its JVM, twice in a row: nothing lost, nothing doubled."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.integration.batch_waits import files_batches, kill_mid_batch, wait_more_batches
from tests.integration.conftest import files_args
from tests.integration.harness import (
    drop_file_for_next_batch,
    make_text,
    truth,
    wait_for_totals,
    window_outputs,
    windows_of,
)

pytestmark = pytest.mark.timeout(480)
WINDOW_MS = 10_000  # 5 slides: Spark uses the inverse function from 5 slides on


# CI kills the driver with kill -9 in test_supervise.py, test_files_sink.py, test_keyed_sum.py,
# test_cluster.py and test_kafka_chaos.py: this one (201 s in CI of 5036512) is `slow`.
@pytest.mark.slow
def test_kill_9_twice_then_totals_equal_ground_truth(dirs: dict[str, Path], start_app: Any) -> None:
    rng = random.Random(2026)
    texts: list[str] = []
    batches: dict[int, list[str]] = {}  # batch time -> texts it reads

    def add(name: str) -> None:
        texts.append(make_text(rng, rng.randint(20, 60)))
        batch = drop_file_for_next_batch(dirs["input"], name, texts[-1].encode(), 1000)
        batches.setdefault(batch, []).append(texts[-1])

    def add_unique(prefix: str) -> None:  # kill_mid_batch may add more than one
        add(f"{prefix}-{len(texts)}.txt")

    # A sliding window next to the totals, reduced with its inverse function: its state is
    # checkpointed and recovered too.
    keep_all = dirs["checkpoint"].parent / "keep.ini"
    keep_all.write_text("[output]\noutput_keep = 1000\n")  # every window, to check them all
    args = files_args(
        dirs, "--window", str(WINDOW_MS // 1000), "--slide", "2", "--config", str(keep_all),
        "--checkpoint-interval", "4",  # a multiple of the slide; the window is checkpointed too
    )  # fmt: skip
    app = start_app(*args)
    app.wait_for_log(r"Started new streaming context")
    add("r1-a.txt")
    wait_for_totals(dirs["output"], truth(texts), app)
    for kill in range(2):
        # Kill -9 mid-batch (checked): the batch of a new file planned, its output not done.
        before = partial(add_unique, f"r{kill + 1}-b")
        kill_mid_batch(app, files_batches(dirs["checkpoint"], dirs["output"]), before)
        add(f"r{kill + 1}-while-down.txt")
        app = start_app(*args)
        app.wait_for_log(r"Recovered streaming context from checkpoint .* at batch_time_ms=\d+")
        assert "Creating new context" not in app.log(), "the factory ran on recovery"
        assert "Started new streaming context" not in app.log()
        add(f"r{kill + 2}-a.txt")
        wait_for_totals(dirs["output"], truth(texts), app)
    wait_more_batches(app)  # more batches: a replay would show as doubled totals now
    wait_for_totals(dirs["output"], truth(texts), app, timeout=5)
    assert app.terminate() == 0
    # Every window kept (some span the kills), against the files and their batch times.
    windows = window_outputs(dirs["output"])
    assert len(windows) >= 10, sorted(windows)
    expected = windows_of(batches, sorted(windows), WINDOW_MS)
    assert windows == expected
    assert any(windows.values()), "every window kept was empty: the test proves nothing"
