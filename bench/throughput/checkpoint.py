"""Checkpoint cost: the app's throughput at state checkpoint intervals of 1, 5 and 10 batches.

    python bench/run.py checkpoint [--rounds N] [--lines N] [--workdir DIR]

A part of bench/run.py, and a command of its own (it starts its own broker). Two measures:

- across runs: the mean processing of the steady batches, per interval, against an
  interval that no run reaches (1000 batches): the runs are minutes apart, and on this
  shared machine their noise is as large as the cost;
- within a run: only one batch in N writes the state checkpoint, so the batches that
  wrote one are set against the others of the same run (the same JVM, the same minute).
  The extra time of a batch that writes, spread over N batches, is the throughput lost.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S
from bench.harness.corpus import broker, load_topic
from bench.harness.periodic import writes_checkpoint
from bench.harness.rates import interleaved, runner
from bench.harness.results import make_workdir, median, write_json
from streaming_app.common.metrics_record import BatchMetrics

# Checkpoint intervals compared, in batches; 1000 batches never comes within a run.
CHECKPOINT_BATCHES = (1, 5, 10, 1000)
WITHIN_FIELDS = ("written_s", "others_s", "extra_s", "within_loss_pct")


def within_run(batches: list[tuple[bool, float]], every: int) -> dict[str, float | None]:
    """The batches of one run that wrote a checkpoint against the others.

    batches: (wrote a checkpoint, processing seconds) of the steady batches. Figures: the
    median processing of each kind, the extra of a batch that writes, and the throughput
    that extra costs at this interval, extra / (every * others + extra), in percent.
    None where the run has no batch of one kind (every batch writes, or none does).
    """
    written = [s for wrote, s in batches if wrote]
    others = [s for wrote, s in batches if not wrote]
    if not written or not others:
        return dict.fromkeys(WITHIN_FIELDS)
    wrote, plain = median(written), median(others)
    extra = wrote - plain
    return {
        "written_s": round(wrote, 3),
        "others_s": round(plain, 3),
        "extra_s": round(extra, 3),
        "within_loss_pct": round(100 * extra / (every * plain + extra), 1),
    }


def per_batch_figures(every: int) -> Callable[[list[BatchMetrics], list[BatchMetrics]], Any]:
    """within_run for app_rate's per_batch: (every batch of the run, its steady batches)."""

    def figures(batches: list[BatchMetrics], steady: list[BatchMetrics]) -> Any:
        first = min(b.batch_time_ms for b in batches)
        return within_run(
            [
                (
                    writes_checkpoint(b.batch_time_ms, first, b.batch_interval_ms, every),
                    (b.processing_ms or 0) / 1000,
                )
                for b in steady
            ],
            every,
        )

    return figures


def checkpoint_cost(
    workdir: Path,
    bootstrap: str,
    lines: int,
    batch_lines: int,
    intervals: tuple[int, ...],
    rounds: int,
) -> Any:
    """Throughput at each checkpoint interval (in batches), both ways.

    Per interval, the median over `rounds` interleaved runs of: the mean over the steady
    batches (words over processing time; only one batch in N checkpoints, so not the
    median), its loss against the last interval, and the within-run figures.
    """
    topic = load_topic(bootstrap, lines, seed=3)
    found = interleaved(rounds, {
        batches: runner(
            workdir, f"checkpoint-{batches}", bootstrap, topic, lines, batch_lines,
            "--checkpoint-interval", str(batches * BATCH_S),
            "--snapshot-keep", "0",  # snapshots follow the checkpoint interval: not measured here
            per_batch=per_batch_figures(batches),
        )
        for batches in intervals
    }, each=("processing_s", "within_loss_pct"))  # fmt: skip
    best = found[intervals[-1]]["mean_words_per_s"]
    return {
        str(batches): {
            **figures, "loss_pct": round(100 * (1 - figures["mean_words_per_s"] / best), 1)
        }
        for batches, figures in found.items()
    }  # fmt: skip


def _cell(value: float | None, unit: str) -> str:
    return "—" if value is None else f"{value}{unit}"


def _within(figures: dict[str, Any]) -> str:
    """The within-run loss: the median, and each run's."""
    if figures["within_loss_pct"] is None:
        return "—"
    runs = ", ".join(_cell(v, "%") for v in figures["runs_within_loss_pct"])
    return f"{figures['within_loss_pct']}% ({runs})"


def checkpoint_report(cost: dict[str, Any], lines: int) -> list[str]:
    """The checkpoint table of docs/benchmarks.md."""
    order = sorted(cost, key=int)  # results.json sorts its keys as text
    runs, last = cost[order[0]]["runs"], order[-1]
    return [
        f"**Checkpoint cost** (the same kind of run over {lines:,} lines, each with its own "
        f"checkpoint directory; snapshots off; per interval the median of {runs} runs, "
        "interleaved. Across runs: the mean over the steady batches, against an interval of "
        f"{last} batches, which no run reaches. Within a run: the batches that wrote the "
        "state checkpoint against the others of the same run, and the throughput their "
        "extra time costs at that interval):",
        "",
        "| checkpoint interval | processing of a batch (mean) | each run (median) | "
        f"loss against {last} batches | batches that wrote a checkpoint | the others | "
        "extra per checkpoint | loss within the run (each run) |",
        "|---|---|---|---|---|---|---|---|",
        *[
            f"| {n} batch{'es' if n != '1' else ''} | {c['mean_processing_s']} s | "
            + ", ".join(f"{s} s" for s in c["runs_processing_s"])
            + f" | {c['loss_pct']}% | {_cell(c['written_s'], ' s')} | "
            f"{_cell(c['others_s'], ' s')} | {_cell(c['extra_s'], ' s')} | {_within(c)} |"
            for n, c in ((n, cost[n]) for n in order)
        ],
    ]


def main() -> None:
    """Run the checkpoint cost alone and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs per interval [3]")
    parser.add_argument("--lines", type=int, default=600_000, help="lines per run [600000]")
    parser.add_argument("--batch-lines", type=int, default=20_000, help="per batch [20000]")
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    workdir = make_workdir(options.workdir, "streaming-app-bench-")
    with broker(workdir) as bootstrap:
        cost = checkpoint_cost(
            workdir, bootstrap, options.lines, options.batch_lines, CHECKPOINT_BATCHES,
            options.rounds,
        )  # fmt: skip
    write_json(workdir / "checkpoint.json", cost)
    print("\n".join(checkpoint_report(cost, options.lines)))
    print(f"\n(logs, metrics and checkpoint.json in {workdir})", file=sys.stderr)
