"""The two engines side by side on the same input: DStreams and `--engine structured`.

    python bench/run.py engines [--inputs kafka,files|none] [--rounds 2] [--sizes 20000,60000]
                            [--recovery-runs 3] [--file-rounds 6] [--round-lines 60000]
                            [--million KEYS]

Both read one preloaded topic in equal capped batches (`max_rate_per_partition`; the
structured engine's read limit per micro-batch) in the exact configuration the README
recommends (`--sink files --sink console`, snapshots and state checkpoints at their
defaults), the runs interleaved, with the baseline of bench/throughput/exact.py (one kafka-python
consumer and `Counter`) in the same invocation. Per engine: words/s of processing (the
steady batches' records over their processing time; the structured engine's processing
time is the whole trigger, planning to commit, from its StreamingQueryListener), the
median batch, what a batch with no input costs (the DStream engine runs one every
interval; the structured engine runs no micro-batch without new input), and the seconds
from a restart after kill -9 to the first completed batch (bench/state/recovery.py).

Beside them, in the same invocation, the floor under the structured engine: Spark's own
`groupBy(word).count()` with nothing of the engine's (bench/peers/spark_peer.py's query; on Kafka
through the engine's own data source and Spark settings, bench/peers/plain.py), in the same
batches, restarts and state of many keys.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness.app import EXACT_CHECKPOINT_BATCHES, AppRun, exact_args, poll_until, restart
from bench.harness.corpus import WORDS_PER_LINE, baseline_seconds, broker, load_topic
from bench.harness.rates import idle_batches, interleaved, runner
from bench.harness.results import make_workdir, median, write_json
from bench.peers.peer import dstream_rounds, figures, files_app_args, move_in, write_rounds
from bench.peers.peer import structured_rounds as peer_rounds
from bench.peers.plain import plain_rate, plain_recovery, plain_runner
from bench.peers.spark_peer import APP_TOKENIZER, ENGINE_SETTINGS, StructuredRun
from bench.state.recovery import recovery
from bench.state.state_size import state_of_keys
from streaming_app.common.metrics_record import BatchMetrics

ENGINES: dict[str, tuple[str, ...]] = {"dstream": (), "structured": ("--engine", "structured")}
RUN_BATCHES = EXACT_CHECKPOINT_BATCHES + 3  # 2 warm-up, a checkpoint interval, the last
PEER = "groupBy(word).count()"
PEER_KAFKA = (
    "Spark's own word count, bench/peers/spark_peer.py's query to the `noop` sink, through the "
    "structured engine's Kafka data source, with its Spark settings and JVM launch "
    "(bench/peers/plain.py)"
)
# On files too, the peer runs with the engine's Spark settings and JVM launch (RocksDB,
# the worker daemon, the class archive): nothing of Spark's own costs more than the engine's.
PEER_ARGS = (ENGINE_SETTINGS,)
PEER_TOKENIZER = "the same, with the DStream jobs' tokenizer"
PEER_TOKENIZER_HOW = (
    f"{PEER_TOKENIZER!r}: that query counting the words the structured engine counts, the "
    "DStream jobs' `count_words` per partition in `mapInArrow`, then "
    "`groupBy(word).agg(sum(n))`"
)
# Each peer: its label, its runs' directory name, its arguments beyond PEER_ARGS.
PEERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (PEER, "plain", ()),
    (PEER_TOKENIZER, "plain-tokenizer", (APP_TOKENIZER,)),
)
TARGET_BATCH, TARGET_RESTART, TARGET_MILLION_S = 1.5, 1.25, 1.0  # issue 29
MILLION_LINES, MILLION_BATCH = 200_000, 20_000  # after every key once; 20,000-line batches
SNAPSHOT_EVERY = ("--snapshot-interval", "10")  # snapshots of the whole state run too
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
    # The floor: Spark's own word count on the engine's Kafka source and settings, with
    # Spark's split and with the words the engine must count (the DStream jobs' tokenizer).
    runs.update({
        (size, peer): plain_runner(
            workdir, f"engines-{size}-{name}", bootstrap, topic, size * RUN_BATCHES, size, *extra
        )
        for size in sizes for peer, name, extra in PEERS
    })  # fmt: skip
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
    restarts[PEER] = plain_recovery(workdir, bootstrap, recovery_runs, 20_000)
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
        "**The two engines on the same Kafka input** (`python bench/run.py engines`; `local[2]`, "
        "2 s batches or triggers, `--sink files --sink console` with the defaults, lines of "
        f"10 words over a Zipf vocabulary of 100k words, capped batches; median of {runs} "
        "runs each, interleaved; the baseline, one kafka-python consumer + `Counter`, did "
        f"{e['baseline_words_per_s']:,} words/s in the same invocation; "
        f"{PEER}: {PEER_KAFKA}; {PEER_TOKENIZER_HOW}):",
        "",
        "| lines per batch | engine | words/s of processing | ratio to the baseline | "
        "processing of a batch (median) | a batch with no input | each run |",
        "|---|---|---|---|---|---|---|",
    ]
    order = [*ENGINES, *(peer for peer, _, _ in PEERS)]
    for r in sorted(e["rows"], key=lambda r: (r["batch_lines"], order.index(r["engine"]))):
        idle = "none runs" if r["engine"] != "dstream" else (
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


FILES_PER_ROUND = 2
STARTED = ("Started new streaming context", "Started new query")


def structured_rounds(
    base: Path, plan: list[list[Path]], lines_per_round: int, *extra: str
) -> list[Any]:
    """The app's structured engine on the rounds: (processing s, micro-batches) of each."""
    name = "structured"
    input_dir, staging = base / name / "in", base / name / "staging"
    input_dir.mkdir(parents=True)
    staging.mkdir()
    app = AppRun.start(base, name, files_app_args(base, name, *extra, "--engine", "structured"))
    found, read, used = [], 0, 0
    try:
        poll_until(app.log.read_text, lambda text: STARTED[1] in text, app.proc, app.log, 180,
                   "structured run")  # fmt: skip
        for paths in plan:
            move_in(paths, staging, input_dir)
            read += lines_per_round
            batches = app.wait_for(
                lambda b, read=read: sum(x.records or 0 for x in b) >= read,
                timeout=120 + lines_per_round / 500,
            )
            busy = [b for b in batches if b.records]
            mine, used = busy[used:], len(busy)
            found.append((sum(b.processing_ms or 0 for b in mine) / 1000, len(mine)))
    finally:
        app.stop()
    return found


def files_restarts(
    input_dir: Path, staging: Path, start: Callable[[], tuple[Any, float]], plan: list[list[Path]]
) -> list[float]:
    """Seconds from each restart after kill -9 to the first completed batch: the run
    (`start`: a run and those seconds, on the checkpoint of a rounds run) recovers with the
    first round of `plan` moved in, then for each other round: kill -9, the round moved in
    while it is down, a restart."""
    move_in(plan[0], staging, input_dir)
    run, _ = start()  # recovered from the rounds run: not a kill -9
    first = []
    try:
        for paths in plan[1:]:
            time.sleep(6)  # past a state checkpoint, as a long-running driver would be
            run.kill9()
            move_in(paths, staging, input_dir)
            run, seconds = start()
            first.append(seconds)
    finally:
        run.stop()
    return first


def of_restarts(first: list[float]) -> dict[str, Any]:
    """Each restart's seconds to its first completed batch, and their median."""
    return {
        "first_batch_s": [round(x, 1) for x in first],
        "first_batch_median_s": round(median(first), 1),
    }


def peer_restart(base: Path) -> tuple[StructuredRun, float]:
    """Spark's own word count (bench/peers/spark_peer.py) started again on the checkpoint of its
    rounds run in base."""
    run = StructuredRun.start(base, base / "structured-in", base / "structured-ck", *PEER_ARGS)
    return run, run.first_batch_s()


def files_baseline_seconds(paths: list[Path]) -> float:
    """The baseline's work on one round: its files' lines counted with Counter."""
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                counts.update(line.split())
    return time.perf_counter() - started


def files_engines(workdir: Path, rounds: int, round_lines: int, restarts: int) -> dict[str, Any]:
    """Both engines on the same rounds of files, then each one's restarts after kill -9."""
    base = workdir / "files"
    (base / "rounds").mkdir(parents=True)
    per_file = round_lines // FILES_PER_ROUND
    runs = len(ENGINES) + 1  # and the peer's
    plan = write_rounds(base / "rounds", rounds + runs * (restarts + 1), FILES_PER_ROUND, per_file)
    measured, spare = plan[:rounds], plan[rounds:]
    lines = per_file * FILES_PER_ROUND
    words = lines * WORDS_PER_LINE
    baseline = median([files_baseline_seconds(paths) for paths in measured])

    def of_rounds(read: list[Any]) -> dict[str, Any]:
        found = figures(read, words)
        return {**found, "ratio": round(found["median_words_per_s"] * baseline / words, 3)}

    found: dict[str, Any] = {}
    for number, (engine, extra) in enumerate(ENGINES.items()):
        sinks = exact_args(base / engine)
        if engine == "dstream":
            read, idle_s = dstream_rounds(base, measured, lines, *sinks, name=engine)
        else:
            read, idle_s = structured_rounds(base, measured, lines, *sinks), None
        again = spare[number * (restarts + 1) : (number + 1) * (restarts + 1)]
        args = files_app_args(base, engine, *sinks, *extra)
        first = files_restarts(
            base / engine / "in", base / engine / "staging",
            partial(restart, base, engine, args), again,
        )  # fmt: skip
        found[engine] = {**of_rounds(read), "idle_s": idle_s, **of_restarts(first)}
    # The peer users would write instead: Spark's own word count, groupBy(word).count(),
    # on the same rounds (bench/peers/spark_peer.py's query; no exactness beyond Spark's, no sinks).
    (base / PEER).mkdir()
    found[PEER] = of_rounds(peer_rounds(base / PEER, measured, lines, *PEER_ARGS))
    again = spare[len(ENGINES) * (restarts + 1) :]
    first = files_restarts(
        base / PEER / "structured-in", base / PEER / "structured-staging",
        partial(peer_restart, base / PEER), again,
    )  # fmt: skip
    found[PEER].update(of_restarts(first))
    # The same query with the words the structured engine must count: the DStream jobs'
    # tokenizer in Python (mapInArrow), not Spark's split.
    (base / "peer-tokenizer").mkdir()
    tokenized = peer_rounds(base / "peer-tokenizer", measured, lines, *PEER_ARGS, APP_TOKENIZER)
    found[PEER_TOKENIZER] = of_rounds(tokenized)
    return {
        "rounds": rounds,
        "files_per_round": FILES_PER_ROUND,
        "round_lines": lines,
        "baseline_words_per_s": round(words / baseline),
        "restarts": restarts,
        "engines": found,
    }


def files_report(f: dict[str, Any]) -> list[str]:
    """The two engines' table on the same files, for docs/benchmarks.md."""
    steady = max(f["rounds"] - 1, 1)
    lines = [
        "**The two engines on the same files** (`python bench/run.py engines --inputs files`; "
        "`local[2]`, 2 s batches or triggers, the files source, `--sink files --sink console` "
        f"with the defaults; {f['rounds']} rounds of {f['files_per_round']} files, "
        f"{f['round_lines']:,} lines of 10 words over a Zipf vocabulary of 100k words a "
        "round, the same files for both, moved in at once, the next round once the round is "
        f"counted; medians over the {steady} round{'s' if steady != 1 else ''} after the first; "
        "the engines one after "
        "the other; the baseline, `Counter` over one round's lines in one process, did "
        f"{f['baseline_words_per_s']:,} words/s in the same invocation; {PEER}: "
        "bench/peers/spark_peer.py's query with the structured engine's Spark settings and JVM "
        f"launch, one round after the other as the engines; {PEER_TOKENIZER_HOW}):",
        "",
        "| engine | words/s of processing | ratio to the baseline | processing of a round "
        "(median) | (mean) | batches a round | a batch with no input | restart after kill -9 "
        "to the first completed batch (median) | each restart |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for engine, r in f["engines"].items():
        idle = "none runs" if engine != "dstream" else (
            "—" if r.get("idle_s") is None else f"{r['idle_s']} s"
        )  # fmt: skip
        restart = f"{r['first_batch_median_s']} s" if "first_batch_median_s" in r else "—"
        lines.append(
            f"| {engine} | {r['median_words_per_s']:,} | {r['ratio']} | "
            f"{r['median_processing_s']} s | {r['mean_processing_s']} s | "
            f"{', '.join(map(str, r['batches']))} | {idle} | "
            f"{restart} | {', '.join(map(str, r.get('first_batch_s', ['—'])))} |"
        )
    return lines


def million_report(k: dict[str, Any]) -> list[str]:
    """The two engines with a state of many keys, for docs/benchmarks.md."""
    return [
        f"**The two engines with a state of {k['keys']:,} keys** (`python bench/run.py engines "
        f"--inputs none --million {k['keys']}`; Kafka, the topic holds every key once, then "
        f"{k['lines']:,} Zipf lines over them, read in capped batches of "
        f"{MILLION_BATCH:,} lines; snapshots every 10 s; figures of the batches after the "
        "state is full; peak resident memory of the app's processes over the whole run; "
        f"{PEER}: {PEER_KAFKA}, with the same capped batches; {PEER_TOKENIZER_HOW}):",
        "",
        "| engine | processing of a batch | words/s | driver (Python) | JVM | "
        "largest Python worker |",
        "|---|---|---|---|---|---|",
        *[
            f"| {v['variant']} | {v['processing_s']} s | {v['words_per_s']:,} | "
            + " | ".join(
                f"{v[key]} MiB" if key in v else "not measured"
                for key in ("driver_mib", "jvm_mib", "largest_worker_mib")
            )
            + " |"
            for v in k["variants"]
        ],
    ]


def _with_tokenizer(measure: str, seconds: dict[str, float]) -> list[tuple[str, Any, str]]:
    """The row of a measure with the peer that counts the DStream jobs' words in the peer's
    column, if that peer was measured."""
    if PEER_TOKENIZER not in seconds:
        return []
    return [(
        f"{measure}; {PEER} with the DStream jobs' tokenizer",
        {**seconds, PEER: seconds[PEER_TOKENIZER]}, "",
    )]  # fmt: skip


def targets_report(found: dict[str, Any]) -> list[str]:
    """Each of issue 29's measures in this run: the structured engine and Spark's own
    `groupBy(word).count()`, each over the DStream engine, against the target."""
    table: list[tuple[str, dict[str, float], str]] = []
    by_size: dict[int, dict[str, float]] = {}
    for r in found.get("rows", []):
        by_size.setdefault(r["batch_lines"], {})[r["engine"]] = r["processing_s"]
    for size, seconds in sorted(by_size.items()):
        table.append((f"Kafka, a batch of {size:,} lines", seconds, f"≤ {TARGET_BATCH}x"))
        table += _with_tokenizer(f"Kafka, a batch of {size:,} lines", seconds)
    if "recovery" in found:
        medians = {k: r["first_batch_median_s"] for k, r in found["recovery"].items()}
        table.append(("Kafka, restart after kill -9", medians, f"≤ {TARGET_RESTART}x"))
    if "files" in found:
        engines = found["files"]["engines"]
        rounds = {k: r["median_processing_s"] for k, r in engines.items()}
        table.append((
            "files, a round (median)", rounds, f"≤ {TARGET_BATCH}x, and ≤ {PEER}'s"
        ))  # fmt: skip
        table += _with_tokenizer("files, a round (median)", rounds)
        medians = {k: r["first_batch_median_s"] for k, r in engines.items()
                   if "first_batch_median_s" in r}  # fmt: skip
        table.append(("files, restart after kill -9", medians, f"≤ {TARGET_RESTART}x"))
    if "million" in found:
        million = {v["variant"]: v["processing_s"] for v in found["million"]["variants"]}
        measure = f"{found['million']['keys']:,} keys, a batch of {MILLION_BATCH:,} lines"
        table.append((measure, million, f"≤ {TARGET_MILLION_S} s"))
        table += _with_tokenizer(measure, million)
    lines = [
        "**Issue 29's measures in this run** (medians from the tables above; each system's "
        "figure over the DStream engine's):",
        "",
        f"| measure | dstream | structured | {PEER} | structured / dstream | "
        f"{PEER} / dstream | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for measure, seconds, target in table:
        cells = [f"{seconds[k]} s" if k in seconds else "—" for k in (*ENGINES, PEER)]
        ratios = [
            f"{seconds[k] / seconds['dstream']:.2f}x"
            if k in seconds and seconds.get("dstream") else "—"
            for k in ("structured", PEER)
        ]  # fmt: skip
        lines.append(f"| {measure} | {' | '.join(cells)} | {' | '.join(ratios)} | {target} |")
    return lines


def main() -> None:
    """Run both engines and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--inputs",
        default="kafka,files",
        help="kafka, files, both, or none (with --million: that alone) [both]",
    )
    parser.add_argument("--sizes", default="20000,60000", help="Kafka: lines per batch")
    parser.add_argument("--rounds", type=int, default=2, help="Kafka: runs of each [2]")
    parser.add_argument("--recovery-runs", type=int, default=3, help="kill -9 per engine [3]")
    parser.add_argument("--file-rounds", type=int, default=6, help="files: rounds [6]")
    parser.add_argument("--round-lines", type=int, default=60_000, help="files: lines a round")
    parser.add_argument(
        "--million", type=int, default=0, help="also a state of this many keys (0: not run)"
    )
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    inputs = [i.strip() for i in options.inputs.split(",") if i.strip()]
    if inputs == ["none"] and options.million:
        inputs = []
    elif not inputs or set(inputs) - {"kafka", "files"}:
        parser.error(
            f"--inputs: kafka, files, both, or none with --million, not {options.inputs!r}"
        )
    workdir = make_workdir(options.workdir, "streaming-app-engines-")
    found: dict[str, Any] = {}
    report: list[str] = []
    if "kafka" in inputs:
        sizes = tuple(int(s) for s in options.sizes.split(","))
        with broker(workdir) as bootstrap:
            found = engines(workdir, bootstrap, sizes, options.rounds, options.recovery_runs)
        report += engines_report(found)
    if "files" in inputs:
        found["files"] = files_engines(
            workdir, options.file_rounds, options.round_lines, options.recovery_runs
        )
        report += ["", *files_report(found["files"])] if report else files_report(found["files"])
    if options.million:
        with broker(workdir) as bootstrap:
            found["million"] = state_of_keys(
                workdir, bootstrap, options.million, MILLION_LINES, MILLION_BATCH,
                [(engine, (*extra, *SNAPSHOT_EVERY)) for engine, extra in ENGINES.items()],
            )  # fmt: skip
            million = found["million"]
            million["variants"] += [
                {"variant": peer, **plain_rate(
                    workdir, f"keys-{name}", bootstrap, million["topic"],
                    million["loading_lines"] + MILLION_LINES, MILLION_BATCH, *extra,
                    skip_lines=million["loading_lines"],
                )}
                for peer, name, extra in PEERS
            ]  # fmt: skip
        report += ["", *million_report(found["million"])]
    report += ["", *targets_report(found)]
    write_json(workdir / "engines.json", found)
    print("\n".join(report))
    print(f"\n(logs, metrics and engines.json in {workdir})", file=sys.stderr)
