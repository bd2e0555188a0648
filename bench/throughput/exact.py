"""Throughput in the exact configuration: files + console sinks, against the baseline.

The README's setup for exact totals (`--sink files --sink console`, a state checkpoint
and a snapshot every 10 batches) reads one topic in equal capped batches of each size,
for a whole checkpoint interval of steady batches, so that the batches that write the
snapshot, the files sink's base and Spark's checkpoint count in the figures; the console
sink alone runs beside it at the headline size, labelled. The baseline (one kafka-python
consumer + `Counter`) reads the same topic in the same invocation. With several sides (a
git revision's code and this checkout, bench/compare.py) every run is made per side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S, EXACT_CHECKPOINT_BATCHES
from bench.harness.corpus import (
    PARTITIONS,
    WORDS_PER_LINE,
    baseline_seconds,
    load_topic,
    two_process_seconds,
)
from bench.harness.rates import interleaved, runner
from bench.harness.results import median
from bench.harness.side_runs import steady_cycle
from bench.throughput.throughput import size_keeps_up, sustained_lines

# Lines per batch tried; the headline is at HEADLINE_LINES.
EXACT_SIZES = (20_000, 60_000, 100_000, 140_000, 200_000)
HEADLINE_LINES = 60_000
EXACT, CONSOLE = "files + console", "console alone"
# A side of a comparison: its label and the copy of the app it runs (None: this checkout),
# and optionally more environment for its runs.
Side = tuple[str, Path | None] | tuple[str, Path | None, dict[str, str]]
THIS_CHECKOUT: tuple[Side, ...] = (("", None),)


def run_lines(batch_lines: int, every: int, warmup: int = 0) -> tuple[int, int]:
    """A run's lines, and the lines before its measured window (app_rate's skip_lines).

    A run reads `warmup` unmeasured batches, 2 of warm-up, `every` steady ones and a last
    one that is left out. Without `warmup` the window starts after the first two busy
    batches by position (skip_lines 0), as it always has.
    """
    lines = batch_lines * (warmup + every + 3)
    return lines, batch_lines * (warmup + 2) if warmup else 0


def ratio(words_per_s: float, base_words: float) -> float:
    """A rate against the baseline's, to three significant digits: a small one (a smoke
    run's batches of a few hundred lines on a busy machine) is not rounded to 0."""
    return float(f"{words_per_s / base_words:.3g}")


def exact_throughput(
    workdir: Path,
    bootstrap: str,
    sizes: tuple[int, ...],
    rounds: int,
    baseline_lines: int,
    baseline_runs: int,
    headline: int = HEADLINE_LINES,
    every: int = EXACT_CHECKPOINT_BATCHES,
    sides: tuple[Side, ...] = THIS_CHECKOUT,
    console: bool = True,
    warmup: int = 0,
) -> dict[str, Any]:
    """Per batch size (and side) the app's figures in the exact configuration, and the
    console sink alone at `headline` lines (unless not `console`); the baseline on the
    same topic. Each run also measures the app's CPU per 1000 lines (`cpu_ms_per_kline`).

    Each run has `warmup` unmeasured batches (0 by default), 2 warm-up batches, `every`
    steady ones (a whole checkpoint interval: one aligned batch, one that writes Spark's
    checkpoint) and a last one that is left out. Any `every` batches in a row hold one
    of each kind, so the window stays a whole interval after any warm-up; the CPU is
    measured from its start (app_rate's skip_lines).
    """
    sizes = tuple(sorted({*sizes, headline}))  # the headline is always measured
    topic = load_topic(bootstrap, max(baseline_lines, run_lines(max(sizes), every, warmup)[0]))
    baseline = median(
        [baseline_seconds(bootstrap, topic, baseline_lines) for _ in range(baseline_runs)]
    )
    base_words = baseline_lines * WORDS_PER_LINE / baseline
    ceiling = median(
        [two_process_seconds(bootstrap, topic, baseline_lines) for _ in range(baseline_runs)]
    )
    plan = [(size, EXACT) for size in sizes] + ([(headline, CONSOLE)] if console else [])
    runs = {}
    for size, sinks in plan:
        lines, skip_lines = run_lines(size, every, warmup)
        for index, (label, code, *env) in enumerate(sides):
            runs[size, sinks, label] = runner(
                workdir, f"exact-{size}-{'files' if sinks == EXACT else 'console'}-side{index}",
                bootstrap, topic, lines, size,
                *(() if sinks == EXACT else ("--checkpoint-interval", str(every * BATCH_S))),
                skip_lines=skip_lines, exact=every if sinks == EXACT else 0, code=code,
                per_batch=steady_cycle(every), cpu=True, env=env[0] if env else None,
            )  # fmt: skip
    found = interleaved(rounds, runs, each=("processing_s", "mean_words_per_s", "cpu_ms_per_kline"))
    rows = []
    for (size, sinks, label), figures in found.items():
        rows.append({
            "batch_lines": size, "sinks": sinks, "side": label, **figures,
            "keeps_up": size_keeps_up(figures),
            "ratio": ratio(figures["mean_words_per_s"], base_words),
            "median_ratio": ratio(figures["words_per_s"], base_words),
        })  # fmt: skip
    sustained = {}
    for label, *_ in sides:
        tried = [r for r in rows if r["side"] == label and r["sinks"] == EXACT]
        best = sustained_lines(tried)
        words = best * WORDS_PER_LINE / BATCH_S
        sustained[label] = {
            "batch_lines": best, "words_per_s": round(words), "ratio": ratio(words, base_words)
        }  # fmt: skip
    return {
        "baseline_lines": baseline_lines,
        "baseline_runs": baseline_runs,
        "baseline_s": round(baseline, 2),
        "baseline_words_per_s": round(base_words),
        "two_process_s": round(ceiling, 2),
        "two_process_words_per_s": round(baseline_lines * WORDS_PER_LINE / ceiling),
        "headline_lines": headline,
        "checkpoint_batches": every,
        "warmup_batches": warmup,
        "rows": rows,
        "sustained": sustained,
    }


def _cell(value: Any, unit: str = " s") -> str:
    return "—" if value is None else f"{value}{unit}"


def _side(label: str) -> str:
    return f", {label}" if label else ""


def warmup_line(warmup: int) -> list[str]:
    """The report's line on the unmeasured batches each run read first (none: no line)."""
    if not warmup:
        return []
    return [
        f"Each run processed {warmup:,} unmeasured batches first ({warmup * BATCH_S:,} s), then "
        "its 2 warm-up batches: neither the words/s nor the CPU per 1000 lines count them.",
        "",
    ]


def exact_report(e: dict[str, Any]) -> list[str]:
    """The exact configuration's headline and batch size tables for docs/benchmarks.md."""
    headline, every = e["headline_lines"], e["checkpoint_batches"]
    rows = e["rows"]
    runs = rows[0]["runs"]
    lines = [
        "**Throughput in the exact configuration** (Kafka source, `local[2]`, 2 s batches, "
        "`--sink files --sink console` with the defaults: a state checkpoint and a snapshot "
        f"every {every} batches, as the README sets it up for exact totals; lines of 10 words "
        f"over a Zipf vocabulary of 100k words; the headline at **{headline:,}-line batches**. "
        f"Words/s of processing: the words of a run's {every} steady batches, a whole "
        "checkpoint interval with the batches that write the snapshot and the checkpoint, "
        f"divided by their processing time; median of {runs} runs, interleaved):",
        "",
        *warmup_line(e.get("warmup_batches", 0)),
        "| | words/s | ratio to the baseline | how |",
        "|---|---|---|---|",
        f"| baseline: one kafka-python consumer + `Counter` | {e['baseline_words_per_s']:,} | "
        f"| median of {e['baseline_runs']} runs: {e['baseline_s']} s for "
        f"{e['baseline_lines']:,} lines |",
    ]
    if "two_process_s" in e:
        lines.append(
            f"| the baseline's work in {PARTITIONS} processes, a partition each, Counters merged "
            f"(what the cores give plain Python, without Spark) | {e['two_process_words_per_s']:,} "
            f"| {round(e['two_process_words_per_s'] / e['baseline_words_per_s'], 2)} | median of "
            f"{e['baseline_runs']} runs: {e['two_process_s']} s for {e['baseline_lines']:,} lines |"
        )
    for r in rows:
        if r["batch_lines"] != headline:
            continue
        name = (
            f"**streaming_app, files + console sinks, {headline:,}-line batches{_side(r['side'])}**"
            if r["sinks"] == EXACT
            else f"streaming_app, console sink alone (not exact), {headline:,}-line batches"
            f"{_side(r['side'])}"
        )
        bold = "**" if r["sinks"] == EXACT else ""
        target = "target ≥ 1.5; " if r["sinks"] == EXACT else ""
        lines.append(
            f"| {name} | {bold}{r['mean_words_per_s']:,}{bold} | {bold}{r['ratio']}{bold} | "
            f"{target}each run: " + ", ".join(f"{w:,}" for w in r["runs_mean_words_per_s"]) + " |"
        )
    for label, s in e["sustained"].items():
        lines.append(
            f"| streaming_app, files + console sinks, sustained{_side(label)} | "
            f"{s['words_per_s']:,} | {s['ratio']} | the largest batch tried that keeps up, "
            f"as every smaller one does: {s['batch_lines']:,} lines every 2 s (below) |"
        )
    lines += [
        "",
        f"Batch sizes tried ({runs} runs each, interleaved; a run keeps up when its median "
        "processing time is within the 2 s interval and the scheduling delay does not grow "
        "from its first steady batch to its last; a size keeps up when most of its runs do; "
        "aligned: the batches whose time is a multiple of the checkpoint interval, which "
        "write the snapshot (and the files sink's base where it writes one); medians over "
        "the runs):",
        "",
        "| sinks | lines per batch | words/s of processing | each run | ratio to the "
        "baseline | processing of a batch (median) | mean | aligned batches | batches that "
        "wrote Spark's checkpoint | slowest | runs that kept up | keeps up |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["sinks"] != EXACT, r["batch_lines"])):
        lines.append(
            f"| {r['sinks']}{_side(r['side'])} | {r['batch_lines']:,} | "
            f"{r['mean_words_per_s']:,} | "
            + ", ".join(f"{w:,}" for w in r["runs_mean_words_per_s"])
            + f" | {r['ratio']} | {r['processing_s']} s | {r['mean_processing_s']} s | "
            f"{_cell(r['aligned_s'])} | {_cell(r['checkpoint_s'])} | {_cell(r['max_s'])} | "
            f"{r['runs_kept_up']} of {r['runs']} | {'yes' if r['keeps_up'] else 'no'} |"
        )
    return lines
