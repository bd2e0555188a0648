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
    distinct_words,
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


def app_rate(
    workdir: Path,
    name: str,
    bootstrap: str,
    topic: str,
    lines: int,
    batch_lines: int,
    *extra: str,
) -> dict[str, Any]:
    """Read a preloaded topic in equal capped batches; the steady batches' figures."""
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))  # records/s per partition
    args = kafka_args(workdir / name, bootstrap, topic, "--max-rate-per-partition", str(rate))
    app = AppRun.start(workdir, name, [*args, *extra])
    try:
        app.wait_for(lambda b: sum(x.records or 0 for x in b) >= lines, timeout=60 + lines / 100)
    finally:
        app.stop()
    busy = [b for b in app.batches() if b.records and b.processing_ms]
    steady = busy[2:-1] or busy  # without the JVM warm-up and the last, partial batch
    seconds = [(b.processing_ms or 0) / 1000 for b in steady]
    words = [(b.records or 0) * WORDS_PER_LINE / s for b, s in zip(steady, seconds, strict=True)]
    return {
        "batch_lines": PARTITIONS * rate * BATCH_S,
        "batches": len(steady),
        "processing_s": round(median(seconds), 3),
        "words_per_s": round(median(words)),
        "max_scheduling_delay_s": round(
            max((b.scheduling_delay_ms or 0 for b in steady), default=0) / 1000, 2
        ),
    }  # fmt: skip


def throughput(workdir: Path, bootstrap: str, lines: int, batch_lines: int, runs: int) -> Any:
    """Words/s of the app's steady batches vs the baseline, on one preloaded topic."""
    topic = load_topic(bootstrap, lines)
    baseline = [baseline_seconds(bootstrap, topic, lines) for _ in range(runs)]
    app = app_rate(
        workdir, "throughput", bootstrap, topic, lines, batch_lines, "--checkpoint-interval", "20"
    )
    base_words = lines * WORDS_PER_LINE / median(baseline)
    return {
        "lines": lines,
        "batch_lines": app["batch_lines"],
        "batches": app["batches"],
        "baseline_s": round(median(baseline), 2),
        "baseline_words_per_s": round(base_words),
        "app_processing_s": app["processing_s"],
        "app_words_per_s": app["words_per_s"],
        "ratio": round(app["words_per_s"] / base_words, 2),
        "max_scheduling_delay_s": app["max_scheduling_delay_s"],
    }


# Checkpoint intervals compared, in batches; 1000 batches never comes within a run.
CHECKPOINT_BATCHES = (1, 5, 10, 1000)


def checkpoint_cost(
    workdir: Path, bootstrap: str, lines: int, batch_lines: int, intervals: tuple[int, ...]
) -> Any:
    """Throughput at checkpoint intervals of 1, 5 and 10 batches against (nearly) never."""
    topic = load_topic(bootstrap, lines, seed=3)
    found = {}
    for batches in intervals:
        found[batches] = app_rate(
            workdir, f"checkpoint-{batches}", bootstrap, topic, lines, batch_lines,
            "--checkpoint-interval", str(batches * BATCH_S),
            "--snapshot-keep", "0",  # snapshots follow the checkpoint interval: not measured here
        )  # fmt: skip
    best = found[intervals[-1]]["words_per_s"]
    return {
        str(batches): {**figures, "loss_pct": round(100 * (1 - figures["words_per_s"] / best), 1)}
        for batches, figures in found.items()
    }


def state_growth(
    workdir: Path, bootstrap: str, lines: int, batch_lines: int, vocabularies: tuple[int, ...]
) -> Any:
    """Batch processing time as the state holds more keys: one run per vocabulary size."""
    found = {}
    for vocabulary in vocabularies:
        topic = load_topic(bootstrap, lines, seed=4, vocabulary=vocabulary)
        figures = app_rate(
            workdir, f"state-{vocabulary}", bootstrap, topic, lines, batch_lines,
            "--checkpoint-interval", "20",
        )  # fmt: skip
        keys = distinct_words(lines, seed=4, vocabulary=vocabulary)
        found[str(vocabulary)] = {**figures, "keys_at_end": keys}
    return found


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
            "**Checkpoint cost** (the same kind of run, each with its own checkpoint directory; "
            "snapshots off; loss against an interval of 1000 batches, which no run reaches):",
            "",
            "| checkpoint interval | words/s | processing of a batch | loss |",
            "|---|---|---|---|",
            *[
                f"| {n} batch{'es' if n != '1' else ''} | {c['words_per_s']:,} | "
                f"{c['processing_s']} s | {c['loss_pct']}% |"
                for n, c in results["checkpoint_cost"].items()
            ],
            "",
            "**State growth** (the same kind of run, one per vocabulary size, checkpoint "
            "every 10 batches; keys: distinct words of the whole corpus, which the state "
            "holds at the end):",
            "",
            "| vocabulary | keys at the end | processing of a batch | words/s |",
            "|---|---|---|---|",
            *[
                f"| {int(v):,} words | {g['keys_at_end']:,} | {g['processing_s']} s | "
                f"{g['words_per_s']:,} |"
                for v, g in results["state_growth"].items()
            ],
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
            "checkpoint_cost": checkpoint_cost(
                workdir,
                bootstrap,
                sizes["lines"],
                sizes["batch_lines"],
                (1,) if options.smoke else CHECKPOINT_BATCHES,
            ),
            "state_growth": state_growth(
                workdir,
                bootstrap,
                sizes["lines"],
                sizes["batch_lines"],
                (1_000,) if options.smoke else (10_000, 100_000, 1_000_000),
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
