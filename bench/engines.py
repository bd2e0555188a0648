"""The two engines side by side on the same Kafka input: DStreams and `--engine structured`.

    python bench/engines.py [--rounds 2] [--sizes 20000,60000] [--recovery-runs 3]

Both read one preloaded topic in equal capped batches (`max_rate_per_partition`; the
structured engine's read limit per micro-batch) in the exact configuration the README
recommends (`--sink files --sink console`, snapshots and state checkpoints at their
defaults), the runs interleaved, with the baseline of bench/exact.py (one kafka-python
consumer and `Counter`) in the same invocation. Per engine: words/s of processing (the
steady batches' records over their processing time; the structured engine's processing
time is the whole trigger, planning to commit, from its StreamingQueryListener), the
median batch, what a batch with no input costs (the DStream engine runs one every
interval; the structured engine runs no micro-batch without new input), and the seconds
from a restart after kill -9 to the first completed batch (bench/recovery.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (
    EXACT_CHECKPOINT_BATCHES,
    WORDS_PER_LINE,
    baseline_seconds,
    broker,
    load_topic,
    median,
    write_json,
)
from bench.rates import idle_batches, interleaved, runner
from bench.recovery import recovery
from streaming_app.common.metrics_record import BatchMetrics

ENGINES: dict[str, tuple[str, ...]] = {"dstream": (), "structured": ("--engine", "structured")}
RUN_BATCHES = EXACT_CHECKPOINT_BATCHES + 3  # 2 warm-up, a checkpoint interval, the last
IDLE_BATCHES = 3  # the DStream runs go on this many batches after the topic is read


def idle_cost(lines: int) -> Any:
    """per_batch for app_rate: the median processing of the batches that read nothing."""

    def figures(batches: list[BatchMetrics], steady: list[BatchMetrics]) -> dict[str, Any]:
        idle = [(b.processing_ms or 0) / 1000 for b in idle_batches(batches, lines)]
        return {"idle_s": round(median(idle), 3) if idle else None}

    return figures


def engines(
    workdir: Path, bootstrap: str, sizes: tuple[int, ...], rounds: int, recovery_runs: int
) -> dict[str, Any]:
    """Every size on both engines, interleaved; then each engine's recovery."""
    topic = load_topic(bootstrap, max(sizes) * RUN_BATCHES)
    baseline_lines = min(200_000, max(sizes) * RUN_BATCHES)
    baseline = median([baseline_seconds(bootstrap, topic, baseline_lines) for _ in range(3)])
    base_words = baseline_lines * WORDS_PER_LINE / baseline
    runs = {
        (size, engine): runner(
            workdir, f"engines-{size}-{engine}", bootstrap, topic, size * RUN_BATCHES, size,
            *extra, exact=EXACT_CHECKPOINT_BATCHES, per_batch=idle_cost(size * RUN_BATCHES),
            idle=IDLE_BATCHES if engine == "dstream" else 0,
        )
        for size in sizes for engine, extra in ENGINES.items()
    }  # fmt: skip
    found = interleaved(rounds, runs, each=("processing_s", "mean_words_per_s"))
    rows = [
        {"batch_lines": size, "engine": engine, **figures,
         "ratio": round(figures["mean_words_per_s"] / base_words, 2)}
        for (size, engine), figures in found.items()
    ]  # fmt: skip
    restarts = {}
    for engine, extra in ENGINES.items():
        (workdir / f"recovery-{engine}").mkdir(parents=True, exist_ok=True)
        restarts[engine] = recovery(
            workdir / f"recovery-{engine}", bootstrap, recovery_runs, 20_000, *extra
        )
    return {
        "baseline_words_per_s": round(base_words),
        "baseline_lines": baseline_lines,
        "rows": rows,
        "recovery": restarts,
    }


def engines_report(e: dict[str, Any]) -> list[str]:
    """The two engines' table for docs/benchmarks.md."""
    runs = e["rows"][0]["runs"]
    lines = [
        "**The two engines on the same Kafka input** (`python bench/engines.py`; `local[2]`, "
        "2 s batches or triggers, `--sink files --sink console` with the defaults, lines of "
        f"10 words over a Zipf vocabulary of 100k words, capped batches; median of {runs} "
        "runs each, interleaved; the baseline, one kafka-python consumer + `Counter`, did "
        f"{e['baseline_words_per_s']:,} words/s in the same invocation):",
        "",
        "| lines per batch | engine | words/s of processing | ratio to the baseline | "
        "processing of a batch (median) | a batch with no input | each run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(e["rows"], key=lambda r: (r["batch_lines"], r["engine"])):
        idle = "none runs" if r["engine"] == "structured" else (
            "—" if r.get("idle_s") is None else f"{r['idle_s']} s"
        )  # fmt: skip
        lines.append(
            f"| {r['batch_lines']:,} | {r['engine']} | {r['mean_words_per_s']:,} | "
            f"{r['ratio']} | {r['processing_s']} s | {idle} | "
            + ", ".join(f"{w:,}" for w in r["runs_mean_words_per_s"])
            + " |"
        )
    lines += [
        "",
        "| restart after kill -9 | to the first completed batch (median) | each run | "
        "to the backlog read (median) |",
        "|---|---|---|---|",
    ]
    for engine, r in e["recovery"].items():
        lines.append(
            f"| {engine} | {r['first_batch_median_s']} s | "
            f"{', '.join(map(str, r['first_batch_s']))} | {r['caught_up_median_s']} s |"
        )
    return lines


def main() -> None:
    """Run both engines and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,60000", help="lines per batch [20000,60000]")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each [2]")
    parser.add_argument("--recovery-runs", type=int, default=3, help="kill -9 per engine [3]")
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="streaming-app-engines-"))
    workdir.mkdir(parents=True, exist_ok=True)
    sizes = tuple(int(s) for s in options.sizes.split(","))
    with broker(workdir) as bootstrap:
        found = engines(workdir, bootstrap, sizes, options.rounds, options.recovery_runs)
    write_json(workdir / "engines.json", found)
    print("\n".join(engines_report(found)))
    print(f"\n(logs, metrics and engines.json in {workdir})", file=sys.stderr)


if __name__ == "__main__":
    main()
