"""One side of a side-by-side benchmark of the exact configuration, run and checked.

A side is the README's setup for exact totals (bench/throughput/exact.py: Kafka source,
`--sink files --sink console`, a state checkpoint and a snapshot every `every` batches, `local[2]`,
capped batches) with what it adds (settings, environment, its broker). A run reads a
topic of its own in steady batches, is killed with kill -9 once past a state checkpoint,
is restarted while a backlog of one batch waits, reads it, and its files sink's totals
are checked against the corpus and the backlog. bench/costs/security.py and bench/costs/scrape.py
compare sides with `interleaved` (bench/harness/rates.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from bench.harness.app import (
    BATCH_S,
    AppRun,
    exact_args,
    kafka_args,
    restart,
    wait_for_counted,
)
from bench.harness.corpus import PARTITIONS, VOCABULARY, WORDS_PER_LINE, load_topic
from bench.harness.periodic import periodic_figures
from bench.harness.processes import process_cpu_s, session_cpu_s
from bench.harness.rates import batch_figures, idle_batches, steady_batches
from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.sinks.files_layout import read_totals
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import generated_lines, produce

CORPUS_SEED, BACKLOG_SEED = 1, 39


@dataclass(frozen=True)
class Side:
    """One side of the comparison: how its app reaches its broker, and what it adds."""

    label: str
    slug: str
    connection: KafkaConnection
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def corpus_counts(lines: int, seed: int) -> Counter[str]:
    """The words of the first `lines` lines load_topic (or the backlog) sends."""
    counts: Counter[str] = Counter()
    for line in islice(generated_lines(WORDS_PER_LINE, VOCABULARY, seed), lines):
        counts.update(line.split())
    return counts


def run_once(
    workdir: Path,
    name: str,
    side: Side,
    batch_lines: int,
    every: int,
    expected: Counter[str],
    cpu_of: str | None = None,
) -> dict[str, Any]:
    """One run of a side: steady batches, a kill -9 past a checkpoint, a restart with one
    batch of backlog; the steady batches' figures, the restart's, whether the totals are
    exact (the corpus and the backlog, each word counted once), and with `cpu_of` the CPU
    seconds of the process whose command line holds it while the app read the corpus."""
    lines = batch_lines * (every + 3)  # 2 warm-up batches, `every` steady, a last one
    topic = load_topic(side.connection, lines, seed=CORPUS_SEED)
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))
    run_dir = workdir / name
    args = [
        *kafka_args(run_dir, side.connection.bootstrap_servers, topic,
                    "--max-rate-per-partition", str(rate)),
        *exact_args(run_dir, every), *side.args,
    ]  # fmt: skip
    cpu = process_cpu_s(cpu_of) if cpu_of else None
    cpu_before = cpu() if cpu else 0.0
    app = AppRun.start(workdir, name, args, env=side.env)
    try:
        # The app's CPU over its batches after the first two (JVM warm-up), to the end
        # of the corpus: on a loaded machine a steadier measure than the batches' time.
        app.wait_for(lambda b: sum(1 for x in b if x.records) >= 2, 120 + lines / 50)
        warm_cpu_s = session_cpu_s(app.proc.pid)
        wait_for_counted(app, lines, 120 + lines / 50)
        app_cpu_s = round(session_cpu_s(app.proc.pid) - warm_cpu_s, 2)
        cpu_s = round(cpu() - cpu_before, 2) if cpu else None
        batches = app.batches()
        # Past a state checkpoint written after the corpus was read, as a long-running
        # driver is: `every` batches that read nothing have completed (on a loaded machine
        # a wait of `every` intervals could kill it with those still queued).
        app.wait_for(lambda b: len(idle_batches(b, lines)) >= every, 120 + 6 * every * BATCH_S)
        app.kill9()
        backlog = generated_lines(WORDS_PER_LINE, VOCABULARY, BACKLOG_SEED)
        produce(side.connection, topic, backlog, batch_lines, 0, PARTITIONS)
        app, first_s = restart(workdir, name, args, side.env)
        wait_for_counted(app, lines + batch_lines, 300)
        caught_up_s = time.time() - app.started
        _, totals = read_totals(str(run_dir / "output"))
        app.kill9()  # every figure is taken: a graceful stop would only cost time
    finally:
        app.stop()
    busy = [b for b in batches if b.records and b.processing_ms]
    steady = steady_batches(busy, [b.records or 0 for b in busy], 0)
    return {
        **batch_figures([(b.records or 0, (b.processing_ms or 0) / 1000) for b in steady]),
        **steady_cycle(every)(batches, steady),
        "restart_first_batch_s": round(first_s, 1),
        "restart_caught_up_s": round(caught_up_s, 1),
        "exact": totals == expected,
        "cpu_s": cpu_s,
        "app_cpu_s": app_cpu_s,
    }


# The figures of every run that the report shows, beside their medians.
EACH = ("processing_s", "mean_words_per_s", "restart_first_batch_s", "restart_caught_up_s",
        "exact", "cpu_s", "app_cpu_s")  # fmt: skip


def runner(
    workdir: Path,
    side: Side,
    batch_lines: int,
    every: int,
    expected: Counter[str],
    cpu_of: str | None = None,
    prefix: str = "security",
) -> Callable[[str], dict[str, Any]]:
    return lambda suffix: run_once(
        workdir, f"{prefix}-{side.slug}-{suffix}", side, batch_lines, every, expected, cpu_of
    )


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 2) if denominator else float("nan")


def each_run(values: list[Any]) -> str:
    """Every run's value, for a report's brackets."""
    return ", ".join(str(v) for v in values)


def words_cell(row: dict[str, Any]) -> str:
    """A side's words/s of processing in a report's table, every run in brackets."""
    runs = ", ".join(f"{w:,}" for w in row["runs_mean_words_per_s"])
    return f"{row['mean_words_per_s']:,} ({runs})"


def seconds_cell(row: dict[str, Any], field: str) -> str:
    """A side's median of `field` (seconds) in a report's table, every run in brackets."""
    return f"{row[field]} s ({each_run(row['runs_' + field])})"


def side_row(row: dict[str, Any], cells: list[str], marked: str) -> str:
    """A side's row in a report's table: its name (bold if it is `marked`), its cells, and
    how many of its runs were exact."""
    bold = "**" if row["side"] == marked else ""
    exact = f"{sum(row['runs_exact'])} of {row['runs']}"
    return f"| {bold}{row['side']}{bold} | {' | '.join(cells)} | {exact} |"


def steady_cycle(every: int) -> Callable[[list[BatchMetrics], list[BatchMetrics]], Any]:
    """app_rate's per_batch: the steady batches' periodic figures (bench/harness/periodic.py)."""

    def figures(batches: list[BatchMetrics], steady: list[BatchMetrics]) -> Any:
        return periodic_figures(steady, min(b.batch_time_ms for b in batches), every, "")

    return figures
