"""Benchmarks of streaming_app: throughput against a single-process baseline, and recovery.

    python bench/run.py [--smoke] [--update-docs]

Everything runs here, on loopback: a Kafka-protocol broker (tansu, or KAFKA_BOOTSTRAP),
the app as a subprocess in local[2] mode, the baseline in this process. Figures are
medians of repeated runs, measured side by side in one invocation; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (
    PARTITIONS,
    WORDS_PER_LINE,
    AppRun,
    broker,
    kafka_args,
    load_topic,
    machine,
    median,
    write_json,
)
from streaming_app.kafka_client import KafkaConnection
from streaming_app.metrics_report import BatchMetrics
from streaming_app.produce import generated_lines, produce

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BATCH_S = 2


def baseline_seconds(bootstrap: str, topic: str, lines: int) -> float:
    """One plain kafka-python consumer counting with Counter: seconds to read the topic."""
    from kafka import KafkaConsumer, TopicPartition

    started = time.perf_counter()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        counts: Counter[str] = Counter()
        read = 0
        while read < lines:
            for records in consumer.poll(timeout_ms=1000, max_records=10_000).values():
                for record in records:
                    counts.update(record.value.decode("utf-8", "replace").split())
                read += len(records)
    finally:
        consumer.close()
    return time.perf_counter() - started


def records_by_batch(metrics: Path) -> dict[int, int]:
    """Records per batch time; a batch re-run after a restart may say null: keep the known."""
    found: dict[int, int] = {}
    if not metrics.exists():
        return found
    for line in metrics.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by kill -9
        if isinstance(record.get("records"), int):
            found[record["batch_time_ms"]] = max(found.get(record["batch_time_ms"], 0),
                                                 record["records"])  # fmt: skip
    return found


def completed_since(start_ms: float, batches: list[BatchMetrics]) -> bool:
    """Whether a batch completed after start_ms."""
    return any(b.completed_ms > start_ms for b in batches)


def wait_for_counted(app: AppRun, lines: int, timeout: float) -> None:
    """Wait until the app's batches have read `lines` records in all."""
    app.wait_for(lambda _: sum(records_by_batch(app.metrics).values()) >= lines, timeout)


def throughput(workdir: Path, bootstrap: str, lines: int, batch_lines: int, runs: int) -> Any:
    """Words/s of the app's steady batches vs the baseline, on one preloaded topic."""
    topic = load_topic(bootstrap, lines)
    baseline = [baseline_seconds(bootstrap, topic, lines) for _ in range(runs)]
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))  # records/s per partition
    app = AppRun.start(
        workdir, "throughput",
        kafka_args(workdir / "throughput", bootstrap, topic, "--checkpoint-interval", "20",
                   "--max-rate-per-partition", str(rate)),
    )  # fmt: skip
    try:
        app.wait_for(lambda b: sum(x.records or 0 for x in b) >= lines, timeout=60 + lines / 100)
    finally:
        app.stop()
    busy = [b for b in app.batches() if b.records and b.processing_ms]
    steady = busy[2:-1] or busy  # without the JVM warm-up and the last, partial batch
    app_words = [b.records * WORDS_PER_LINE / (b.processing_ms / 1000) for b in steady]  # type: ignore[operator]
    base_words = lines * WORDS_PER_LINE / median(baseline)
    delays = [b.scheduling_delay_ms or 0 for b in steady]
    return {
        "lines": lines,
        "batch_lines": PARTITIONS * rate * BATCH_S,
        "batches": len(steady),
        "baseline_s": round(median(baseline), 2),
        "baseline_words_per_s": round(base_words),
        "app_processing_s": round(median([b.processing_ms / 1000 for b in steady]), 3),  # type: ignore[operator]
        "app_words_per_s": round(median(app_words)),
        "ratio": round(median(app_words) / base_words, 2),
        "max_scheduling_delay_s": round(max(delays, default=0) / 1000, 2),
    }


def recovery(workdir: Path, bootstrap: str, runs: int, backlog: int) -> Any:
    """Seconds from a restart after kill -9 to its first batch, and to catching up a backlog."""
    topic = load_topic(bootstrap, 1000, seed=2)
    args = kafka_args(workdir / "recovery", bootstrap, topic, "--checkpoint-interval", "10")
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
            app = AppRun.start(workdir, "recovery", args)  # appends to the same metrics
            start_ms = app.started * 1000
            batches = app.wait_for(partial(completed_since, start_ms), timeout=180)
            done = min(b.completed_ms for b in batches if b.completed_ms > start_ms)
            first.append((done - start_ms) / 1000)
            wait_for_counted(app, sent, 300)
            caught_up.append((time.time() * 1000 - start_ms) / 1000)
    finally:
        app.stop()
    return {
        "runs": runs,
        "backlog_lines": backlog,
        "first_batch_s": [round(x, 1) for x in first],
        "first_batch_median_s": round(median(first), 1),
        "caught_up_s": [round(x, 1) for x in caught_up],
        "caught_up_median_s": round(median(caught_up), 1),
    }


def report(results: dict[str, Any]) -> str:
    """The results section of docs/benchmarks.md."""
    t, r, m = results["throughput"], results["recovery"], results["machine"]
    return "\n".join(
        [
            f"Measured {results['date']} with `{results['command']}` on {m['cpu']}; Python "
            f"{m['python']}, PySpark {m['pyspark']}, {m['java']}; broker: {m['broker']}.",
            "",
            "**Throughput** (Kafka source, `local[2]`, 2 s batches, console sink; "
            f"{t['lines']:,} lines of 10 words over a Zipf vocabulary of 100k words):",
            "",
            "| | words/s | how |",
            "|---|---|---|",
            f"| baseline: one kafka-python consumer + `Counter` | {t['baseline_words_per_s']:,} | "
            f"median of the runs: {t['baseline_s']} s for the topic |",
            f"| streaming_app | {t['app_words_per_s']:,} | median over {t['batches']} steady "
            f"batches of {t['batch_lines']:,} lines: {t['app_processing_s']} s of processing"
            " each |",
            f"| **ratio app / baseline** | **{t['ratio']}** | scheduling delay at most "
            f"{t['max_scheduling_delay_s']} s |",
            "",
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
    )


def update_docs(section: str) -> None:
    """Replace the text between the results markers of docs/benchmarks.md."""
    text = DOCS.read_text()
    new, found = re.subn(
        r"(<!-- results -->\n).*?(\n<!-- /results -->)",
        lambda match: match.group(1) + section + match.group(2),
        text,
        flags=re.S,
    )
    if not found:
        raise SystemExit(f"{DOCS} has no <!-- results --> markers")
    DOCS.write_text(new)


def main() -> None:
    """Run the benchmarks and print (and optionally record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness")
    parser.add_argument("--update-docs", action="store_true", help="write docs/benchmarks.md")
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    sizes = dict(lines=2_000, batch_lines=400, runs=1, kills=1, backlog=500)
    if not options.smoke:
        sizes = dict(lines=200_000, batch_lines=20_000, runs=5, kills=5, backlog=50_000)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="streaming-app-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    command = "python bench/run.py" + (" --smoke" if options.smoke else "")
    with broker(workdir) as bootstrap:
        results = {
            "date": time.strftime("%Y-%m-%d"),
            "command": command,
            "machine": machine(),
            "throughput": throughput(
                workdir, bootstrap, sizes["lines"], sizes["batch_lines"], sizes["runs"]
            ),
            "recovery": recovery(workdir, bootstrap, sizes["kills"], sizes["backlog"]),
        }
    write_json(workdir / "results.json", results)
    section = report(results)
    print(section)
    print(f"\n(logs, metrics and results.json in {workdir})", file=sys.stderr)
    if options.update_docs:
        update_docs(section)


if __name__ == "__main__":
    main()
