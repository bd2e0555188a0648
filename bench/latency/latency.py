"""End-to-end latency: a record's timestamp to its word's total visible in each sink.

    python bench/run.py latency [--smoke] [--seconds 60] [--rates 0.5,0.9]
                                [--sustained [ENGINE=]WORDS,...] [--sinks files,postgres]
                                [--engines dstream,structured,peer] [--intervals 2]
                                [--workdir DIR]

Each run: a fresh topic (2 partitions) on the broker; a background load of Zipf lines at
the rate (a share of the engine's `--sustained` words/s, bench/latency/load.py) from the
run's start; the app (`streaming-app run`, batches of each of `--intervals`, 2 s by
default, the console sink beside the files sink as the README sets it up, or beside the
postgres sink; checkpoints and snapshots at their defaults; `--engine structured` for
the structured engine), or Spark's own word count (`peer`: bench/peers/spark_peer.py
with the engine's settings, its Kafka data source and the app's output through
foreachBatch: the files sink's, or the postgres sink's table with each partition's totals
upserted, `--app-postgres`; 2 s triggers). After its first batch and `--warmup` seconds
(and, for a DStream run, once its start-up backlog is worked off), a probe every 0.25 s
for `--seconds`; a reader polls the sink every 0.1 s
(bench/latency/readers.py). Latency = the poll that first saw the word - the record's
timestamp; p50, p99, max over the probes; the median batch time of the probes' window
from the app's metrics file (the peer's: its triggers) and the target, p99 within the
batch interval plus twice that median. At each rate the engines run one after the other.

The sustained rate is an option, not measured here: bench/throughput/exact.py's search
(a run per batch size) takes longer than every latency run together; its default is the
exact configuration's sustained rate in docs/benchmarks.md (200,000 lines of 10 words
every 2 s, the largest size tried: 1,000,000 words/s), for every engine unless given
per engine (`--sustained 400000,dstream=1000000`: the peer runs beside the structured
engine at its rates). Whether each run kept up at its rate (its median batch within the
interval, the scheduling delay not growing) is in its row.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness.app import (
    BATCH_S,
    EXACT_CHECKPOINT_BATCHES,
    AppRun,
    exact_args,
    kafka_args,
)
from bench.harness.corpus import PARTITIONS, broker
from bench.harness.results import machine, make_workdir, write_json
from bench.latency.load import Load, Prober
from bench.latency.probes import (
    ProbeBook,
    batch_figures,
    drained,
    latency_figures,
    latency_report,
    target_s,
)
from bench.latency.readers import Reader, Watcher, files_reader, peer_reader, postgres_reader
from bench.peers.spark_peer import (
    APP_OUTPUT,
    APP_POSTGRES,
    APP_TOKENIZER,
    ENGINE_SETTINGS,
    StructuredRun,
)
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import ensure_topic

DSN = os.environ.get("TEST_POSTGRES_DSN") or "postgresql://postgres@127.0.0.1:5432/test"
SUSTAINED = 1_000_000  # words/s: docs/benchmarks.md, the exact configuration's sustained
PROBE_EVERY_S = 0.25
POLL_S = 0.1
SETTLE_S = 30  # after the last probe: how long the unseen ones are waited for
DRAIN_S = 120  # after the warm-up: how long a DStream run's start-up backlog is waited for
ENGINES = ("dstream", "structured", "peer")
SINKS = ("files", "postgres")


def drop_tables(table: str) -> None:
    """Drop the postgres sink's tables of a run."""
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        for suffix in ("", "_progress", "_staging"):
            conn.execute(f'DROP TABLE IF EXISTS "{table}{suffix}"')


def run_table(run_dir: Path) -> str:
    """The postgres table of a run (the app's or the peer's): its directory's name."""
    return run_dir.name.replace("-", "_")


def app_args(
    run_dir: Path, bootstrap: str, topic: str, engine: str, sink: str, interval: int = BATCH_S
) -> list[str]:
    """The app's arguments: the console sink beside the files sink (the README's exact
    configuration) or beside the postgres sink (a table of the run's own); batches of
    `interval` seconds (a later option overrides kafka_args' 2 s; the state checkpoint
    and snapshots every 10 batches, the default, at any interval)."""
    args = [*kafka_args(run_dir, bootstrap, topic), "--engine", engine]
    args += ["--batch-interval", str(interval)]
    if sink == "files":
        every = EXACT_CHECKPOINT_BATCHES * interval
        return [*args, *exact_args(run_dir), "--checkpoint-interval", str(every)]
    config = run_dir / "postgres.ini"
    config.write_text(f"[postgres]\npostgres_dsn = {DSN}\n", encoding="utf-8")
    return [*args, "--sink", "postgres", "--postgres-table", run_table(run_dir),
            "--config", str(config)]  # fmt: skip


def probe(
    bootstrap: str, topic: str, read: Reader, seconds: float, load: Load, window: list[int]
) -> tuple[ProbeBook, float, float]:
    """Probes for `seconds`, then up to SETTLE_S for the last ones to show; the book, and
    the words/s the load sent while probing, and the CPU seconds a second this process
    (the reader, the prober) took meanwhile (`window`: gets the probing's start and end,
    epoch ms)."""
    book = ProbeBook()
    sent_before, cpu_before = load.sent_words(), time.process_time()
    watcher = Watcher(read, book, POLL_S)
    prober = Prober(bootstrap, topic, book, PROBE_EVERY_S)
    window.append(int(time.time() * 1000))
    prober.start()
    try:
        time.sleep(seconds)
    finally:
        prober.stop()
        window.append(int(time.time() * 1000))
        sent = load.sent_words() - sent_before
        cpu = time.process_time() - cpu_before
        deadline = time.monotonic() + SETTLE_S
        while not book.all_seen() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        watcher.stop()
    seconds_probed = max(1e-3, (window[1] - window[0]) / 1000)
    return book, sent / seconds_probed, cpu / seconds_probed


def run_app(
    workdir: Path, bootstrap: str, engine: str, sink: str, words: int, seconds: float,
    warmup: float, interval: int = BATCH_S,
) -> dict[str, Any]:  # fmt: skip
    """One run of the app: the load, the warm-up, the probes; its figures."""
    topic = f"latency-{uuid.uuid4().hex[:8]}"
    ensure_topic(KafkaConnection(bootstrap), topic, PARTITIONS)
    name = f"lat-{engine}-{sink}-{words}-{interval}s-{uuid.uuid4().hex[:6]}"
    run_dir = workdir / name
    run_dir.mkdir(parents=True)
    table = run_table(run_dir)  # the postgres sink's, the app's or the peer's
    window: list[int] = []
    load = Load(bootstrap, topic, words)
    load.start()
    app: AppRun | StructuredRun | None = None
    try:
        if engine == "peer":
            output = [APP_OUTPUT] if sink == "files" else [APP_POSTGRES, f"{DSN},{table}"]
            peer = StructuredRun.start(
                run_dir, None, run_dir / "checkpoint", "--kafka", f"{bootstrap},{topic},0",
                ENGINE_SETTINGS, APP_TOKENIZER, *output,
            )  # fmt: skip
            app = peer
            peer.wait_for(lambda events: any("batch" in e for e in events), 300)
            read = (
                peer_reader(run_dir / "output") if sink == "files" else postgres_reader(DSN, table)
            )
        else:
            started = AppRun.start(
                workdir, name, app_args(run_dir, bootstrap, topic, engine, sink, interval)
            )
            app = started
            started.wait_for(lambda batches: bool(batches), 300)
            if sink == "files":
                read = files_reader(run_dir / "output")
            else:
                read = postgres_reader(DSN, table)
        time.sleep(warmup)
        if isinstance(app, AppRun) and engine == "dstream":
            with contextlib.suppress(RuntimeError):  # not drained: probed all the same
                app.wait_for(lambda b: drained([x.scheduling_delay_ms for x in b]), DRAIN_S)
        warmed = time.monotonic() - load.started
        book, produced, reader_cpu = probe(bootstrap, topic, read, seconds, load, window)
    finally:
        load.stop()
        if app is not None:
            app.stop()
        if sink == "postgres":
            with contextlib.suppress(Exception):
                drop_tables(table)
    start, end = window
    if isinstance(app, StructuredRun):
        events = [e for e in app.events() if "batch" in e and start <= e["at"] * 1000 <= end]
        batches = batch_figures([e["trigger_ms"] / 1000 for e in events], [], interval)
    else:
        assert isinstance(app, AppRun)
        steady = [b for b in app.batches() if start <= b.completed_ms <= end]
        delays = [(b.scheduling_delay_ms or 0) / 1000 for b in steady]
        batches = batch_figures(
            [(b.processing_ms or 0) / 1000 for b in steady],
            delays if any(b.scheduling_delay_ms is not None for b in steady) else [],
            interval,
        )
    figures = latency_figures(book)
    return {
        "engine": engine, "sink": sink, "words_per_s": words,
        "produced_words_per_s": round(produced), "reader_cpu": round(reader_cpu, 3),
        **figures, **batches,
        "target_s": target_s(interval, batches["median_batch_s"]), "run": name,
        "interval_s": interval, "started_probing_s": round(warmed, 1),
    }  # fmt: skip


def latency(
    workdir: Path, bootstrap: str, engines: list[str], sinks: list[str], shares: list[float],
    sustained: dict[str, int], seconds: float, warmup: float,
    intervals: tuple[int, ...] = (BATCH_S,),
) -> list[dict[str, Any]]:  # fmt: skip
    """Every (sink, interval, rate, engine) run, the engines one after the other at each
    rate; the peer at 2 s triggers only (bench/peers/spark_peer.py's)."""
    rows = []
    plan = [(sink, interval, share, engine) for sink in sinks for interval in intervals
            for share in shares for engine in engines]  # fmt: skip
    for sink, interval, share, engine in plan:
        if engine == "peer" and interval != BATCH_S:
            continue  # the peer runs 2 s triggers only
        words = round(sustained[engine] * share)
        row = run_app(workdir, bootstrap, engine, sink, words, seconds, warmup, interval)
        row["share"] = share
        print(latency_report({**_meta(sustained, seconds, warmup), "rows": [row]})[-1],
                      file=sys.stderr, flush=True)  # fmt: skip
        rows.append(row)
    return rows


def parse_sustained(text: str, engines: tuple[str, ...] = ENGINES) -> dict[str, int]:
    """`--sustained`: words/s per engine, from `WORDS` (every engine) and `ENGINE=WORDS`
    items (that engine); an engine given none gets SUSTAINED."""
    every, given = SUSTAINED, {}
    for item in (i.strip() for i in text.split(",") if i.strip()):
        engine, _, words = item.rpartition("=")
        if engine and engine not in engines:
            raise SystemExit(f"error: --sustained: unknown engine {engine}")
        if not words.isdigit() or int(words) <= 0:
            raise SystemExit(f"error: --sustained: {item!r} is not [ENGINE=]WORDS")
        if engine:
            given[engine] = int(words)
        else:
            every = int(words)
    return {engine: given.get(engine, every) for engine in engines}


def _meta(sustained: dict[str, int], seconds: float, warmup: float) -> dict[str, Any]:
    return {"sustained": sustained, "seconds": seconds, "warmup_s": warmup,
            "probe_every_s": PROBE_EVERY_S, "poll_s": POLL_S, "interval_s": BATCH_S}  # fmt: skip


def _names(text: str, known: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"error: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def main() -> None:
    """Measure, print the table, record results.json."""
    parser = argparse.ArgumentParser(prog="run.py latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="a short run at a small rate: checks the harness")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=60, help="probing, per run")
    parser.add_argument("--warmup", type=float, default=20,
                        help="seconds after the first batch before probing")  # fmt: skip
    parser.add_argument("--rates", default="0.5,0.9", help="shares of the sustained rate")
    parser.add_argument(
        "--sustained",
        default=str(SUSTAINED),
        help="the sustained rate, words/s: WORDS for every engine or ENGINE=WORDS items "
        "(default: docs/benchmarks.md's, the DStream engine's)",
    )
    parser.add_argument("--sinks", default=",".join(SINKS), help=f"of {', '.join(SINKS)}")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"of {', '.join(ENGINES)}")
    parser.add_argument("--intervals", default=str(BATCH_S),
                        help="batch intervals to run, seconds (the peer: 2 only)")  # fmt: skip
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    shares = [float(s) for s in options.rates.split(",") if s.strip()]
    seconds, warmup = options.seconds, options.warmup
    sustained = parse_sustained(options.sustained)
    if options.smoke:
        seconds, warmup, shares = 6, 4, shares[:1]
        sustained = dict.fromkeys(ENGINES, 20_000)
    workdir = make_workdir(options.workdir, "streaming-app-latency-")
    engines = _names(options.engines, ENGINES)
    sinks = _names(options.sinks, SINKS)
    with broker(workdir) as bootstrap:
        intervals = tuple(int(i) for i in options.intervals.split(",") if i.strip())
        rows = latency(
            workdir, bootstrap, engines, sinks, shares, sustained, seconds, warmup, intervals
        )
    found = {
        "date": time.strftime("%Y-%m-%d"), "machine": machine(),
        "command": "python bench/run.py latency " + " ".join(sys.argv[1:]),
        **_meta(sustained, seconds, warmup), "rows": rows,
    }  # fmt: skip
    write_json(workdir / "results.json", found)
    print("\n".join(latency_report(found)))
    print(f"\n(logs, metrics and results.json in {workdir})", file=sys.stderr)
