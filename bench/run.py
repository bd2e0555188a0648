"""Benchmarks of streaming_app: throughput against a single-process baseline, and recovery.

    python bench/run.py [--smoke] [--update-docs]

Everything runs here, on loopback: a Kafka-protocol broker (tansu, or KAFKA_BOOTSTRAP),
the app as a subprocess in local[2] mode, the baseline in this process. Figures are
medians of repeated runs, measured side by side in one invocation; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checkpoint import CHECKPOINT_BATCHES, checkpoint_cost, checkpoint_report
from bench.harness import (
    BATCH_S,
    PARTITIONS,
    WORDS_PER_LINE,
    AppRun,
    PeakMemory,
    baseline_seconds,
    broker,
    distinct_words,
    kafka_args,
    load_topic,
    machine,
    median,
    write_json,
)
from bench.micro import micro, micro_report, per_line, per_line_report
from bench.peer import peer, peer_report
from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import generated_lines, produce

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
# Lines per batch tried for the sustained rate.
BATCH_SIZES = (20_000, 80_000, 140_000, 170_000, 200_000, 230_000, 260_000)


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
    skip_lines: int = 0,
    memory: bool = False,
    code: Path | None = None,
    per_batch: Callable[[list[BatchMetrics], list[BatchMetrics]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Read a preloaded topic in equal capped batches; the steady batches' figures.

    Steady: after the first two batches (JVM warm-up), or after the batches that read the
    first `skip_lines` lines, and before the last (partial) batch. With `memory`, the peak
    resident memory of the app's processes too. `code`: run the app from that copy.
    `per_batch`: more figures, from (every batch of the run, the steady batches).
    """
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))  # records/s per partition
    args = kafka_args(workdir / name, bootstrap, topic, "--max-rate-per-partition", str(rate))
    app = AppRun.start(workdir, name, [*args, *extra], code=code)
    peak = PeakMemory(app.proc.pid) if memory else None
    try:
        app.wait_for(lambda b: sum(x.records or 0 for x in b) >= lines, timeout=120 + lines / 50)
    finally:
        memory_figures = peak.stop() if peak else {}
        app.stop()
    batches = app.batches()
    busy = [b for b in batches if b.records and b.processing_ms]
    if skip_lines:
        read = list(itertools.accumulate(b.records or 0 for b in busy))
        steady = [b for b, before in zip(busy, [0, *read], strict=False) if before >= skip_lines]
        steady = steady[:-1] or steady
    else:
        steady = busy[2:-1] or busy  # without the JVM warm-up and the last, partial batch
    seconds = [(b.processing_ms or 0) / 1000 for b in steady]
    words = [(b.records or 0) * WORDS_PER_LINE / s for b, s in zip(steady, seconds, strict=True)]
    return {
        "batch_lines": PARTITIONS * rate * BATCH_S,
        "batches": len(steady),
        "processing_s": round(median(seconds), 3),
        "words_per_s": round(median(words)),
        "mean_words_per_s": round(
            sum(b.records or 0 for b in steady) * WORDS_PER_LINE / max(sum(seconds), 1e-9)
        ),
        "mean_processing_s": round(sum(seconds) / len(seconds), 3),
        "max_scheduling_delay_s": round(
            max((b.scheduling_delay_ms or 0 for b in steady), default=0) / 1000, 2
        ),
        "first_scheduling_delay_s": round((steady[0].scheduling_delay_ms or 0) / 1000, 2),
        "last_scheduling_delay_s": round((steady[-1].scheduling_delay_ms or 0) / 1000, 2),
        **memory_figures,
        **(per_batch(batches, steady) if per_batch else {}),
    }  # fmt: skip


# What each optimization adds, measured side by side on the throughput topic: the
# layout of 0.2.0 first, the defaults last. Each row keeps the changes of the rows above.
OPTIMIZATIONS = (
    ("0.2.0: one state record per key, stock worker daemon",
     ("--state-buckets", "0", "--spark-conf", "spark.python.daemon.module=pyspark.daemon")),
    ("+ workers forked from a preloaded, gc-frozen daemon", ("--state-buckets", "0")),
    ("+ state in 64 buckets, a batch merged into it in one shuffle (the defaults now)", ()),
)  # fmt: skip

BASELINE_WITHOUT_C_CRC = (
    "import sys; sys.modules['crc32c'] = None; sys.path.insert(0, {root!r}); "
    "from bench.harness import baseline_seconds; "
    "print(baseline_seconds({bs!r}, {topic!r}, {lines}))"
)


def baseline_without_c_crc(bootstrap: str, topic: str, lines: int) -> float:
    """baseline_seconds with kafka-python's pure-Python CRC-32C, in a subprocess."""
    code = BASELINE_WITHOUT_C_CRC.format(
        root=str(Path(__file__).resolve().parent.parent), bs=bootstrap, topic=topic, lines=lines
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def runner(workdir: Path, name: str, *args: Any, **options: Any) -> Callable[[str], dict[str, Any]]:
    """app_rate(workdir, name, *args, **options) as a run of `interleaved` (its name gets
    a suffix)."""
    return lambda suffix: app_rate(workdir, f"{name}-{suffix}", *args, **options)


def interleaved(
    rounds: int,
    measure: dict[Any, Callable[[str], dict[str, Any]]],
    each: tuple[str, ...] = ("processing_s",),
) -> dict[Any, dict[str, Any]]:
    """Every measurement `rounds` times, round after round (so that drift hits all alike).

    measure: key -> a run, given a name suffix; per key: the median of every figure over
    the runs that know it (None: not known in that run), `runs` (how many) and, for each
    field of `each`, `runs_<field>`: every run's value (`runs_processing_s` by default).
    """
    found: dict[Any, list[dict[str, Any]]] = {key: [] for key in measure}
    for number in range(1, rounds + 1):
        for key, run in measure.items():
            found[key].append(run(f"r{number}"))
    merged = {}
    for key, runs in found.items():
        figures: dict[str, Any] = {}
        for field, value in runs[0].items():
            values = [r[field] for r in runs if r[field] is not None]  # None: not in that run
            if not values or isinstance(values[0], bool) or not isinstance(values[0], int | float):
                figures[field] = value
            else:
                middle = median(values)
                figures[field] = round(middle) if isinstance(values[0], int) else round(middle, 3)
        figures["runs"] = len(runs)
        for field in each:
            figures[f"runs_{field}"] = [r[field] for r in runs]
        figures["runs_kept_up"] = sum(keeps_up(r) for r in runs)
        merged[key] = figures
    return merged


# Batches per run when looking for the sustained rate (the first two and the last are
# not steady).
SUSTAINED_RUN_BATCHES = 8


def size_keeps_up(figures: dict[str, Any]) -> bool:
    """A batch size keeps up when most of its runs did (figures of `interleaved`)."""
    return 2 * figures["runs_kept_up"] > figures["runs"]


def sustained_lines(tried: list[dict[str, Any]]) -> int:
    """The largest batch size that keeps up with every smaller size tried (0: none).

    On a noisy machine a size can keep up where a smaller one did not; the rate is the
    one below the first size that did not.
    """
    best = 0
    for size in sorted(tried, key=lambda t: t["batch_lines"]):
        if not size["keeps_up"]:
            break
        best = size["batch_lines"]
    return best


def keeps_up(figures: dict[str, Any]) -> bool:
    """Median processing within the interval, and the scheduling delay not growing."""
    return bool(
        figures["processing_s"] <= BATCH_S
        and figures["last_scheduling_delay_s"] <= figures["first_scheduling_delay_s"] + 0.5
    )


def throughput(
    workdir: Path,
    bootstrap: str,
    lines: int,
    batch_lines: int,
    runs: int,
    variants: Any,
    sizes: tuple[int, ...],
    rounds: int,
) -> Any:
    """Words/s the app sustains, and per optimization, vs the baseline, on one topic.

    The baseline and every variant (optimizations switched off, cumulatively) read the
    first `lines` lines; the last variant is the app as it ships. Then the app as it
    ships reads batches of each of `sizes` lines: the largest that keeps up, as every
    smaller one does, is the sustained rate.
    """
    topic = load_topic(bootstrap, max(lines, max(sizes) * SUSTAINED_RUN_BATCHES))
    baseline = [baseline_seconds(bootstrap, topic, lines) for _ in range(runs)]
    slow_crc = [baseline_without_c_crc(bootstrap, topic, lines) for _ in range(runs)]
    base_words = lines * WORDS_PER_LINE / median(baseline)
    by_variant = interleaved(rounds, {
        index: runner(workdir, f"throughput-{index}", bootstrap, topic, lines, batch_lines,
                      "--checkpoint-interval", "20", *extra)
        for index, (_, extra) in enumerate(variants)
    })  # fmt: skip
    rows = [{"variant": label, **by_variant[i]} for i, (label, _) in enumerate(variants)]
    for row in rows:
        row["ratio"] = round(row["words_per_s"] / base_words, 2)
    by_size = interleaved(rounds, {
        size: runner(workdir, f"sustained-{size}", bootstrap, topic,
                     size * SUSTAINED_RUN_BATCHES, size, "--checkpoint-interval", "20")
        for size in sizes
    })  # fmt: skip
    tried = [{**f, "keeps_up": size_keeps_up(f)} for f in by_size.values()]
    best = sustained_lines(tried)
    sustained = best * WORDS_PER_LINE / BATCH_S
    return {
        "lines": lines,
        "baseline_s": round(median(baseline), 2),
        "baseline_words_per_s": round(base_words),
        "baseline_python_crc_s": round(median(slow_crc), 2),
        "baseline_python_crc_words_per_s": round(lines * WORDS_PER_LINE / median(slow_crc)),
        "sustained_batch_lines": best,
        "sustained_words_per_s": round(sustained),
        "ratio": round(sustained / base_words, 2),
        "tried": tried,
        "variants": rows,
    }


# The state layouts compared where the state grows: before (0.2.0) and now.
LAYOUTS = (
    ("one state record per key (0.2.0)", ("--state-buckets", "0")),
    ("64 buckets (now)", ()),
)


def state_growth(
    workdir: Path,
    bootstrap: str,
    lines: int,
    batch_lines: int,
    vocabularies: tuple[int, ...],
    layouts: Any = LAYOUTS,
) -> Any:
    """Batch processing time as the state holds more keys: per vocabulary size and layout."""
    found = {}
    for vocabulary in vocabularies:
        topic = load_topic(bootstrap, lines, seed=4, vocabulary=vocabulary)
        keys = distinct_words(lines, seed=4, vocabulary=vocabulary)
        found_layouts = {}
        for index, (label, extra) in enumerate(layouts):
            found_layouts[label] = app_rate(
                workdir, f"state-{vocabulary}-{index}", bootstrap, topic, lines, batch_lines,
                "--checkpoint-interval", "20", *extra,
            )  # fmt: skip
        found[str(vocabulary)] = {"keys_at_end": keys, "layouts": found_layouts}
    return found


def key_topic(bootstrap: str, keys: int, lines: int) -> tuple[str, int]:
    """A topic with every key once (`w0`..), then `lines` Zipf lines over the same keys.

    Returns the topic and how many lines load the keys.
    """
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    every_key = (
        " ".join(f"w{n}" for n in range(start, min(start + WORDS_PER_LINE, keys)))
        for start in range(0, keys, WORDS_PER_LINE)
    )
    loading = -(-keys // WORDS_PER_LINE)
    produce(KafkaConnection(bootstrap), topic, every_key, loading, 0, PARTITIONS)
    zipf = generated_lines(WORDS_PER_LINE, keys, seed=5)
    produce(KafkaConnection(bootstrap), topic, zipf, lines, 0, PARTITIONS)
    return topic, loading


def state_of_keys(
    workdir: Path, bootstrap: str, keys: int, lines: int, batch_lines: int, variants: Any
) -> Any:
    """Batch time and peak memory once the state holds `keys` keys, per state layout.

    The topic first has every key once (`w0`..), then `lines` Zipf lines over the same
    keys; the figures are those of the batches after the state is full.
    """
    topic, loading = key_topic(bootstrap, keys, lines)
    found = []
    for index, (label, extra) in enumerate(variants):
        figures = app_rate(
            workdir, f"keys-{index}", bootstrap, topic, loading + lines, batch_lines,
            "--checkpoint-interval", "20", *extra, skip_lines=loading, memory=True,
        )  # fmt: skip
        found.append({"variant": label, **figures})
    return {"keys": keys, "lines": lines, "variants": found}


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


def runs_of(figures: dict[str, Any]) -> str:
    """Each run's median processing time, for a table cell."""
    return ", ".join(f"{s} s" for s in figures["runs_processing_s"])


def report(results: dict[str, Any]) -> str:
    """The results section of docs/benchmarks.md."""
    t, r, m = results["throughput"], results["recovery"], results["machine"]
    k, growth = results["state_of_keys"], results["state_growth"]
    # In LAYOUTS' order (before, then now) also when read back from results.json.
    measured = next(iter(growth.values()))["layouts"]
    layouts = [label for label, _ in LAYOUTS if label in measured]
    return "\n".join(
        [
            f"Measured {results['date']} with `{results['command']}` on {m['cpu']}; Python "
            f"{m['python']}, PySpark {m['pyspark']}, {m['java']}; broker: {m['broker']}.",
            "",
            "**Throughput** (Kafka source, `local[2]`, 2 s batches, console sink; lines of "
            "10 words over a Zipf vocabulary of 100k words):",
            "",
            "| | words/s | how |",
            "|---|---|---|",
            f"| baseline: one kafka-python consumer + `Counter` | {t['baseline_words_per_s']:,} | "
            f"median of {results['runs']} runs: {t['baseline_s']} s for {t['lines']:,} lines |",
            f"| streaming_app, sustained | {t['sustained_words_per_s']:,} | the largest batch "
            f"tried that keeps up, as every smaller one does: {t['sustained_batch_lines']:,} "
            "lines every 2 s (below) |",
            f"| **ratio app / baseline** | **{t['ratio']}** | |",
            "",
            f"Batch sizes tried ({t['tried'][0]['runs']} runs each, interleaved, the app as "
            "it ships; a run keeps up when its median processing time is within the 2 s "
            "interval and the scheduling delay does not grow from its first steady batch to "
            "its last; a size keeps up when most of its runs do; figures are medians over the "
            "runs):",
            "",
            "| lines per batch | processing of a batch | each run | words/s of processing | "
            "scheduling delay, first → last steady batch | runs that kept up | keeps up |",
            "|---|---|---|---|---|---|---|",
            *[
                f"| {x['batch_lines']:,} | {x['processing_s']} s | {runs_of(x)} | "
                f"{x['words_per_s']:,} | "
                f"{x['first_scheduling_delay_s']} s → {x['last_scheduling_delay_s']} s | "
                f"{x['runs_kept_up']} of {x['runs']} | {'yes' if x['keeps_up'] else 'no'} |"
                for x in t["tried"]
            ],
            "",
            "**Optimizations, before and after** (the same topic, batches of "
            f"{t['variants'][-1]['batch_lines']:,} lines, {t['variants'][-1]['runs']} runs of "
            "each, interleaved, medians; each row keeps the changes above it; both sides use "
            "kafka-python's C CRC-32C, see the last row):",
            "",
            "| | processing of a batch | each run | words/s of processing | ratio to the "
            "baseline |",
            "|---|---|---|---|---|",
            *[
                f"| {v['variant']} | {v['processing_s']} s | {runs_of(v)} | "
                f"{v['words_per_s']:,} | {v['ratio']} |"
                for v in t["variants"]
            ],
            f"| the baseline itself, with kafka-python's pure-Python CRC-32C (no `crc32c` "
            f"package) | {t['baseline_python_crc_s']} s for the topic | | "
            f"{t['baseline_python_crc_words_per_s']:,} | |",
            "",
            *micro_report(results["micro"], results["micro_lines"]),
            "",
            *per_line_report(results["per_line"], results["per_line_lines"]),
            "",
            *checkpoint_report(results["checkpoint_cost"], results["checkpoint_lines"]),
            "",
            "**State growth** (the same kind of run, one per vocabulary size and state layout, "
            "checkpoint every 10 batches; keys: distinct words of the whole corpus, which the "
            "state holds at the end; processing of a batch of the same 20,000 lines):",
            "",
            f"| vocabulary | keys at the end | {' | '.join(layouts)} |",
            "|---|---|" + "---|" * len(layouts),
            *[
                f"| {int(v):,} words | {g['keys_at_end']:,} | "
                + " | ".join(f"{g['layouts'][label]['processing_s']} s" for label in layouts)
                + " |"
                for v, g in growth.items()
            ],
            "",
            f"**A state of {k['keys']:,} keys** (the topic holds every key once, then "
            f"{k['lines']:,} Zipf lines over them; figures of the batches after the state is "
            "full; peak resident memory of the app's processes over the whole run):",
            "",
            "| state layout | processing of a batch | words/s | driver (Python) | JVM | "
            "largest Python worker | Python workers together (Pss) |",
            "|---|---|---|---|---|---|---|",
            *[
                f"| {v['variant']} | {v['processing_s']} s | {v['words_per_s']:,} | "
                f"{v['driver_mib']} MiB | {v['jvm_mib']} MiB | {v['largest_worker_mib']} MiB | "
                f"{v['workers_together_mib']} MiB |"
                for v in k["variants"]
            ],
            "",
            *peer_report(results["peer"]),
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
    sizes = dict(lines=2_000, batch_lines=400, runs=1, kills=1, backlog=500, keys=2_000,
                 key_lines=1_000, files=1, file_lines=500, rounds=2, app_runs=1,
                 checkpoint_runs=1)  # fmt: skip
    if not options.smoke:
        sizes = dict(lines=200_000, batch_lines=20_000, runs=5, kills=5, backlog=50_000,
                     keys=1_000_000, key_lines=100_000, files=2, file_lines=10_000,
                     rounds=6, app_runs=3, checkpoint_runs=3)  # fmt: skip
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="streaming-app-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    command = "python bench/run.py" + (" --smoke" if options.smoke else "")
    lines, batch_lines = sizes["lines"], sizes["batch_lines"]
    with broker(workdir) as bootstrap:
        results = {
            "date": time.strftime("%Y-%m-%d"),
            "command": command,
            "runs": sizes["runs"],
            "machine": machine(),
            "throughput": throughput(
                workdir, bootstrap, lines, batch_lines, sizes["runs"],
                OPTIMIZATIONS[-1:] if options.smoke else OPTIMIZATIONS,
                (400, 800) if options.smoke else BATCH_SIZES, sizes["app_runs"],
            ),
            "checkpoint_lines": 3 * lines,
            "checkpoint_cost": checkpoint_cost(
                workdir, bootstrap, 3 * lines, batch_lines,
                (2,) if options.smoke else CHECKPOINT_BATCHES, sizes["checkpoint_runs"],
            ),
            "state_growth": state_growth(
                workdir, bootstrap, lines, batch_lines,
                (1_000,) if options.smoke else (10_000, 100_000, 1_000_000),
                LAYOUTS[-1:] if options.smoke else LAYOUTS,
            ),
            "state_of_keys": state_of_keys(
                workdir, bootstrap, sizes["keys"], sizes["key_lines"], batch_lines, LAYOUTS
            ),
            "peer": peer(workdir, sizes["files"], sizes["file_lines"], sizes["rounds"]),
            "micro": micro(bootstrap, batch_lines, 3 if options.smoke else 9),
            "micro_lines": batch_lines,
            "per_line": per_line(bootstrap, lines // 2, 3 if options.smoke else 7),
            "per_line_lines": lines // 2,
            "recovery": recovery(workdir, bootstrap, sizes["kills"], sizes["backlog"]),
        }  # fmt: skip
    write_json(workdir / "results.json", results)
    section = report(results)
    print(section)
    print(f"\n(logs, metrics and results.json in {workdir})", file=sys.stderr)
    if options.update_docs:
        update_docs(section)


if __name__ == "__main__":
    main()
