"""Recovery: from a restart after kill -9 to the first batch, and to a backlog read."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.harness.app import AppRun, kafka_args, restart, wait_for_counted
from bench.harness.corpus import PARTITIONS, WORDS_PER_LINE, load_topic
from bench.harness.results import median
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import generated_lines, produce


def recovery(workdir: Path, bootstrap: str, runs: int, backlog: int, *extra: str) -> Any:
    """Seconds from a restart after kill -9 to its first batch, and to catching up a backlog.

    extra: more arguments of the app (`--engine structured`)."""
    topic = load_topic(bootstrap, 1000, seed=2)
    args = kafka_args(workdir / "recovery", bootstrap, topic, "--checkpoint-interval", "10", *extra)
    sent = 1000
    app = AppRun.start(workdir, "recovery", args)
    first: list[float] = []
    caught_up: list[float] = []
    try:
        wait_for_counted(app, sent, 180)
        for run in range(runs):
            time.sleep(6)  # past a state checkpoint, as a long-running driver would be
            app.kill9()
            lines = generated_lines(WORDS_PER_LINE, 100_000, 100 + run)
            produce(KafkaConnection(bootstrap), topic, lines, backlog, 0, PARTITIONS)
            sent += backlog
            app, seconds = restart(workdir, "recovery", args)
            first.append(seconds)
            wait_for_counted(app, sent, 300)
            caught_up.append(time.time() - app.started)
    finally:
        app.stop()
    return recovery_figures(backlog, first, caught_up)


def recovery_figures(backlog: int, first: list[float], caught_up: list[float]) -> dict[str, Any]:
    """The figures of restarts after kill -9, each to its first completed batch and to the
    backlog (`backlog` lines produced while it was down) read."""
    return {
        "runs": len(first),
        "backlog_lines": backlog,
        "first_batch_s": [round(x, 1) for x in first],
        "first_batch_median_s": round(median(first), 1),
        "caught_up_s": [round(x, 1) for x in caught_up],
        "caught_up_median_s": round(median(caught_up), 1),
    }


def recovery_report(r: dict[str, Any]) -> list[str]:
    """The recovery table of docs/benchmarks.md."""
    return [
        f"**Recovery** after `kill -9` of the driver and its JVM, with {r['backlog_lines']:,} "
        f"lines produced while it was down ({r['runs']} runs):",
        "",
        "| | median | runs |",
        "|---|---|---|",
        f"| restart to the first completed batch | {r['first_batch_median_s']} s | "
        f"{', '.join(map(str, r['first_batch_s']))} |",
        f"| restart to the backlog read | {r['caught_up_median_s']} s | "
        f"{', '.join(map(str, r['caught_up_s']))} |",
    ]
