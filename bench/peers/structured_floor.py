"""The structured engine against Spark's own word count, with and without the app's output.

    python bench/run.py structured-floor [--rounds 3] [--batches 31] [--lines 60000]

One preloaded Kafka topic read in equal capped micro-batches (2 s triggers, `local[2]`,
lines of 10 words over a Zipf vocabulary of 100k words), three runs side by side, rotated
round after round so that none is always last:

- the app, `--engine structured` in the exact configuration the README recommends
  (`--sink files --sink console`, snapshots and checkpoints at their defaults: every
  total written twice each 10 micro-batches, as a files base and a snapshot);
- Spark's own `groupBy(word).agg(sum(n))` of the same words (the DStream jobs'
  tokenizer), to the `noop` sink: nothing written (bench/peers/spark_peer.py, bench/peers/plain.py);
- the same query writing what the app writes, the way Spark's docs write a foreachBatch
  sink (`--app-output`: the batch persisted, each output by Spark's text writer): each
  micro-batch's changed totals, and every 10th micro-batch every total (read with Spark's
  state data source) twice.

All three with the structured engine's Spark settings and JVM launch. Per run: the median
micro-batch and words/s of processing over the steady micro-batches (after the first two,
before the last), those that write every total included; runs long enough (31 batches)
for the state store to reach its steady cadence of snapshots.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.harness.app import EXACT_CHECKPOINT_BATCHES
from bench.harness.corpus import broker, load_topic
from bench.harness.rates import interleaved, runner
from bench.harness.results import make_workdir, write_json
from bench.peers.plain import plain_runner
from bench.peers.spark_peer import APP_OUTPUT, APP_TOKENIZER

RUNS = {
    "app": "the app, `--engine structured`, exact configuration",
    "noop": "Spark's `groupBy(word).agg(sum(n))`, the app's tokenizer, `noop` sink",
    "output": "the same, writing the app's output through Spark's documented foreachBatch",
}


def structured_floor(workdir: Path, bootstrap: str, rounds: int, batches: int, size: int) -> Any:
    """The three runs of each round, rotated; their figures by name."""
    lines = size * batches
    topic = load_topic(bootstrap, lines)
    measure = {
        "app": runner(
            workdir, "app", bootstrap, topic, lines, size, "--engine", "structured",
            exact=EXACT_CHECKPOINT_BATCHES,
        ),
        "noop": plain_runner(workdir, "noop", bootstrap, topic, lines, size, APP_TOKENIZER),
        "output": plain_runner(
            workdir, "output", bootstrap, topic, lines, size, APP_TOKENIZER, APP_OUTPUT
        ),
    }  # fmt: skip
    return interleaved(rounds, measure, each=("processing_s", "mean_words_per_s"), rotate=True)


def floor_report(found: dict[str, Any]) -> list[str]:
    """The table for docs/benchmarks.md: each run, and the app over each peer."""
    app = found["app"]
    lines = [
        "| run | median micro-batch | each run | words/s of processing | each run | "
        "the app over it (median, words/s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, label in RUNS.items():
        f = found[name]
        over = (
            f"{app['processing_s'] / f['processing_s']:.2f}x, "
            f"{f['mean_words_per_s'] / app['mean_words_per_s']:.2f}x"
        )
        lines.append(
            f"| {label} | {f['processing_s']} s | "
            + ", ".join(str(s) for s in f["runs_processing_s"])
            + f" | {f['mean_words_per_s']:,} | "
            + ", ".join(f"{w:,}" for w in f["runs_mean_words_per_s"])
            + f" | {'1' if name == 'app' else over} |"
        )
    return lines


def main() -> None:
    """Run the three side by side and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each [3]")
    parser.add_argument("--batches", type=int, default=31, help="micro-batches a run [31]")
    parser.add_argument("--lines", type=int, default=60_000, help="lines a micro-batch [60000]")
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    workdir = make_workdir(options.workdir, "streaming-app-floor-")
    with broker(workdir) as bootstrap:
        found = structured_floor(workdir, bootstrap, options.rounds, options.batches, options.lines)
    write_json(workdir / "structured_floor.json", found)
    print("\n".join(floor_report(found)))
    print(f"\n(logs, metrics and structured_floor.json in {workdir})", file=sys.stderr)
