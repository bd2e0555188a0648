"""`streaming-app supervise` over a real driver: kill -9 it repeatedly, totals stay exact.

On both engines: the DStream one (getOrCreate) and `--engine structured` (the query's
checkpoint location)."""

from __future__ import annotations

import os
import random
import re
import signal
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from streaming_app.tools.processes import group_gone, signal_group
from tests.integration.batch_waits import (
    files_batches,
    kill_mid_batch,
    logged_batches,
    wait_all_done,
    wait_more_batches,
)
from tests.integration.conftest import files_args
from tests.integration.harness import (
    App,
    drop_file,
    make_text,
    truth,
    wait_for_totals,
)
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED
from tests.integration.test_structured_engine import structured_args

pytestmark = pytest.mark.timeout(480)
KILLS = 3
# Per engine: the run's arguments, its log line on a new start and on a recovery.
ENGINES: dict[str, tuple[Callable[[dict[str, Path]], list[str]], str, str]] = {
    "dstream": (
        files_args,
        r"Started new streaming context",
        "Recovered streaming context from checkpoint",
    ),
    "structured": (structured_args, QUERY_STARTED, QUERY_RECOVERED),
}


# supervise restarts whatever engine it runs: the structured one is `slow`, to keep CI's time.
# `slow` since 2026-11-30, in the rotating shares (to keep CI within its time). In the
# `not slow` suite: supervise's restarts, test_postgres_partition.py's and
# test_kafka_partition.py's.
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_supervise_restarts_a_killed_driver_and_totals_stay_exact(
    engine: str, dirs: dict[str, Path], tmp_path: Path
) -> None:
    run_args, started, recovered = ENGINES[engine]
    rng = random.Random(5)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, rng.randint(20, 60)))
        drop_file(dirs["input"], name, texts[-1].encode())

    def add_unique(prefix: str) -> None:  # kill_mid_batch may add more than one
        add(f"{prefix}-{len(texts)}.txt")

    def driver(start: int) -> int:
        match = supervisor.wait_for_log(rf"started driver pid (\d+) \(start {start}\)")
        return int(match.group(1))

    batches = (
        files_batches(dirs["checkpoint"], dirs["output"])
        if engine == "dstream"
        else logged_batches(dirs["checkpoint"])
    )
    args = ["--backoff", "0.5", "--max-failures", str(KILLS + 1), "--", *run_args(dirs)]
    supervisor = App(args, tmp_path, "supervise", command="supervise")
    drivers: list[int] = []
    try:
        drivers.append(driver(1))
        supervisor.wait_for_log(started)
        add("start-1.txt")
        wait_for_totals(dirs["output"], truth(texts), supervisor)
        for kill in range(1, KILLS + 1):
            # Mid-batch (checked): the batch of a new file planned, its output not complete.
            before = partial(add_unique, f"kill-{kill}-before")
            killpg = partial(os.killpg, drivers[-1], signal.SIGKILL)  # driver, JVM, workers
            kill_mid_batch(supervisor, batches, before, kill=killpg)
            add(f"kill-{kill}-while-down.txt")
            drivers.append(driver(kill + 1))
            assert group_gone(drivers[-2]), "the killed driver's processes are still alive"
            supervisor.wait_for_log(rf"(?s)\(start {kill + 1}\).*{recovered}")
            add(f"start-{kill + 1}.txt")
            wait_for_totals(dirs["output"], truth(texts), supervisor)
        log = supervisor.log()
        assert log.count("driver crashed (killed by SIGKILL); restarting in") == KILLS
        assert not re.search(started, log.split("(start 2)", 1)[1])
        assert "Creating new context" not in log.split("(start 2)", 1)[1]
        if engine == "dstream":  # more batches: a replay would double totals now
            wait_more_batches(supervisor)
        else:  # the replayed micro-batch and any after it done
            wait_all_done(supervisor, batches)
        wait_for_totals(dirs["output"], truth(texts), supervisor, timeout=5)
        assert supervisor.terminate() == 0
        log = supervisor.log()
        assert re.search(r"SIGTERM: passing it to the driver \(pid \d+\)", log)
        assert "driver stopped on request (exit code 0)" in log
        assert log.count("started driver pid") == KILLS + 1
        assert group_gone(drivers[-1])
    finally:
        supervisor.stop_if_running()
        for pgid in drivers:
            signal_group(pgid, signal.SIGKILL)
