"""Per-batch cost with a tiny state, by state layout, in the chaos test's configuration.

    python bench/run.py small-state [--rounds N]

The integration chaos test runs the app with a sliding window (20 s, sliding 4 s), the
files and postgres sinks, 2 s batches and a topic of 3 partitions; its state has 50 keys.
Here that configuration reads 300 lines, then runs on with nothing to read, once per
state layout (64 buckets, the default, and one record per key), the layouts alternated
for N rounds (which goes first alternates too). Figures: the median and the mean
processing time of the batches that read nothing (every second one writes the window),
medians over the rounds. Needs PostgreSQL at 127.0.0.1:5432
(or the libpq PG* variables) and writes a throwaway table to it.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

from bench.harness.app import AppRun
from bench.harness.corpus import broker
from bench.harness.results import make_workdir, median
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import generated_lines, produce

LAYOUTS = {"64 buckets (the default)": [], "one record per key": ["--state-buckets", "0"]}
BATCHES = 24


def run(workdir: Path, bootstrap: str, name: str, extra: list[str]) -> dict[str, float]:
    """One app run: median processing of its empty batches, window and other ones."""
    directory = workdir / name
    directory.mkdir()
    topic = f"small-{uuid.uuid4().hex[:8]}"
    produce(KafkaConnection(bootstrap), topic, generated_lines(8, 50, 1), 300, 0, 3)
    config = directory / "app.ini"
    config.write_text("[postgres]\npostgres_dsn = host=127.0.0.1 port=5432 dbname=postgres\n")
    args = [
        "--source", "kafka", "--bootstrap-servers", bootstrap, "--topics", topic,
        "--checkpoint-dir", str(directory / "checkpoint"), "--output-dir",
        str(directory / "output"), "--batch-interval", "2", "--checkpoint-interval", "4",
        "--snapshot-interval", "10", "--spark-conf", "spark.ui.enabled=false",
        "--max-rate-per-partition", "30", "--sink", "files", "--sink", "postgres",
        "--postgres-table", f"bench_{uuid.uuid4().hex[:8]}", "--config", str(config),
        "--window", "20", "--slide", "4", *extra,
    ]  # fmt: skip
    app = AppRun.start(directory, "run", args)
    try:
        batches = app.wait_for(lambda b: len(b) >= BATCHES, timeout=240)
    finally:
        app.stop()
    # After the input is read and the scheduling delay is back to (about) zero; every
    # second batch also writes the window, so the mean is over both kinds alike.
    empty = [
        b.processing_ms / 1000 for b in batches[8:BATCHES] if not b.records and b.processing_ms
    ]
    return {"median_s": median(empty), "mean_s": sum(empty) / len(empty)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    workdir = make_workdir(None, "streaming-app-small-state-")
    found: dict[str, list[dict[str, float]]] = {layout: [] for layout in LAYOUTS}
    with broker(workdir) as bootstrap:
        for number in range(options.rounds):
            # Alternate which layout goes first, so that drift hits both alike.
            order = list(LAYOUTS) if number % 2 == 0 else list(reversed(LAYOUTS))
            for layout in order:
                found[layout].append(
                    run(workdir, bootstrap, f"{len(LAYOUTS) * number + order.index(layout)}",
                        LAYOUTS[layout])
                )  # fmt: skip
    print("| state layout | a batch that reads nothing: median | mean | runs |")
    print("|---|---|---|---|")
    for layout, runs in found.items():
        middle = median([r["median_s"] for r in runs])
        mean = median([r["mean_s"] for r in runs])
        print(f"| {layout} | {middle:.2f} s | {mean:.2f} s | {len(runs)} |")
    print(f"\n(logs in {workdir})", file=sys.stderr)
