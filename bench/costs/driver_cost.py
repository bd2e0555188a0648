"""What the driver carries: each sink at about 10k and 490k changed keys a batch, both engines.

    python bench/run.py driver-cost [--rounds 1] [--batches 6] [--lines 60000]
                                [--engines dstream,structured] [--workdir DIR]

The exact configuration (Kafka source, 2 s batches capped at `--lines` lines, local[2],
state checkpoints and snapshots at their defaults) with the console sink and either the
files sink (the README's setup for exact totals) or the postgres sink (the local server,
`TEST_POSTGRES_DSN` or postgresql://postgres@127.0.0.1:5432/test), reading a topic whose
batches change about 10,000 keys (10-word lines over 10,000 words) or about 490,000 (each
line 8 words never seen before and 2 of the 10,000). Per run, over its steady batches:
the median processing time; over the run: the peak resident memory of the driver's Python
process and its CPU seconds. The runs are interleaved round after round.

Beside them, the floor of the postgres sink at the large size: PostgreSQL's own COPY of the
topic's fourth batch's changed totals into the staging table (two processes, as two
tasks) and their merge into a table that holds what the app's holds then (the three
batches before, merged the same way), alone, with nothing of the app's; the postgres
sink's batch is compared with the files sink's batch plus that floor.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.harness.corpus import PARTITIONS, WORDS_PER_LINE, broker
from bench.harness.rates import interleaved, runner
from bench.harness.results import machine, make_workdir, median, write_json
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import produce

COMMON = 10_000  # the vocabulary of the small size, and of the large size's common words
FRESH = 8  # words a line never seen before, at the large size
SIZES = {"~10k": False, "~490k": True}  # label: whether lines bring fresh words
DSN = os.environ.get("TEST_POSTGRES_DSN") or "postgresql://postgres@127.0.0.1:5432/test"


def keyed_lines(fresh: bool, seed: int) -> Iterator[str]:
    """Endless 10-word lines: uniform over COMMON words, or FRESH new words and the rest
    over COMMON (every batch then changes about FRESH words a line)."""
    rng = random.Random(seed)
    serial = 0
    while True:
        words = []
        if fresh:
            words = [f"u{serial + i}" for i in range(FRESH)]
            serial += FRESH
        words += [f"w{rng.randrange(COMMON)}" for _ in range(WORDS_PER_LINE - len(words))]
        yield " ".join(words)


def load(bootstrap: str, lines: int, fresh: bool) -> str:
    topic = f"bench-driver-{uuid.uuid4().hex[:8]}"
    produce(KafkaConnection(bootstrap), topic, keyed_lines(fresh, 7), lines, 0, PARTITIONS)
    return topic


def changed_keys(lines: int, fresh: bool) -> int:
    """The keys one batch of `lines` lines changes (its distinct words)."""
    source = keyed_lines(fresh, 7)
    return len({w for _ in range(lines) for w in next(source).split()})


def sink_args(workdir: Path, name: str, engine: str, sink: str) -> list[str]:
    args = ["--engine", engine]
    if sink == "files":
        return [*args, "--sink", "files", "--output-dir", str(workdir / name / "output")]
    config = workdir / f"{name}.ini"
    config.write_text(f"[postgres]\npostgres_dsn = {DSN}\n", encoding="utf-8")
    table = f"bench_{uuid.uuid4().hex[:10]}"
    return [*args, "--sink", "postgres", "--postgres-table", table, "--config", str(config)]


def pg_floor(lines: int, runs: int, before: int = 3) -> dict[str, Any]:
    """PostgreSQL's own COPY and merge of one large batch's changed totals, alone: batch
    `before` + 1 of the topic the app reads (the same words), staged by two processes (as
    two tasks) and merged into a table that holds what the app's table holds then (the
    batches before it, merged the same way, untimed), the staged rows deleted and the
    staging table vacuumed as the app's writer does; the median over `runs` tables."""
    import psycopg

    source = keyed_lines(True, 7)  # load()'s lines, batch after batch
    batches = [
        Counter(w for _ in range(lines) for w in next(source).split()) for _ in range(before + 1)
    ]
    seconds = []
    for _ in range(runs):
        table = f"floor_{uuid.uuid4().hex[:8]}"
        totals: Counter[str] = Counter()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (word text PRIMARY KEY, count bigint NOT NULL,"
                         " last_batch_ms bigint NOT NULL)")  # fmt: skip
            conn.execute(f"CREATE UNLOGGED TABLE {table}_staging (sink text, batch_ms bigint,"
                         " part integer, word text, count bigint)")  # fmt: skip
            for number, batch in enumerate(batches, 1):
                totals.update(batch)
                pairs = [(word, totals[word]) for word in batch]
                took = _floor_batch(conn, table, number, pairs)
                if number == len(batches):
                    seconds.append(took)
            rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            conn.execute(f"DROP TABLE {table}, {table}_staging")
    return {
        "rows": len(batches[-1]),
        "table_rows": int(rows[0]) - len(batches[-1]) if rows else 0,  # before the batch
        "runs": len(seconds),
        "seconds": round(median(seconds), 3),
        "runs_seconds": [round(s, 3) for s in seconds],
    }


def _floor_batch(conn: Any, table: str, batch: int, pairs: list[tuple[str, int]]) -> float:
    """Seconds to stage `pairs` by two forked processes and merge them, as the app does."""
    import multiprocessing

    fork = multiprocessing.get_context("fork")
    go = fork.Event()
    tasks = [
        fork.Process(target=_stage, args=(go, table, batch, part, pairs[part::PARTITIONS]))
        for part in range(PARTITIONS)
    ]  # forked with their rows, so the clock counts no handing over
    for task in tasks:
        task.start()
    time.sleep(1)  # connected and waiting
    started = time.monotonic()
    go.set()
    for task in tasks:
        task.join()
    with conn.transaction():
        conn.execute(
            f"INSERT INTO {table} (word, count, last_batch_ms) SELECT word, count, {batch}"
            f" FROM {table}_staging WHERE sink = 't' AND batch_ms = {batch}"
            " ON CONFLICT (word) DO UPDATE SET count = EXCLUDED.count,"
            " last_batch_ms = EXCLUDED.last_batch_ms"
        )
        conn.execute(f"DELETE FROM {table}_staging WHERE sink = 't' AND batch_ms <= {batch}")
    conn.execute(f"VACUUM (SKIP_LOCKED) {table}_staging")
    return time.monotonic() - started


def _stage(go: Any, table: str, batch: int, part: int, pairs: list[tuple[str, int]]) -> None:
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        go.wait()
        with conn.transaction():
            conn.execute("SET LOCAL synchronous_commit = off")
            with conn.cursor().copy(
                f"COPY {table}_staging (sink, batch_ms, part, word, count) FROM STDIN"
            ) as copy:
                for word, count in pairs:
                    copy.write_row(("t", batch, part, word, count))


def driver_cost(
    workdir: Path, bootstrap: str, rounds: int, batches: int, lines: int, engines: list[str]
) -> dict[str, Any]:
    """Every (engine, sink, size) run `rounds` times, interleaved; the floor beside them."""
    topics = {label: load(bootstrap, lines * batches, fresh) for label, fresh in SIZES.items()}
    runs = {}
    for engine in engines:
        for sink in ("files", "postgres"):
            for label in SIZES:
                name = f"driver-{engine}-{sink}-{label.strip('~')}"
                runs[(engine, sink, label)] = runner(
                    workdir, name, bootstrap, topics[label], lines * batches, lines,
                    *sink_args(workdir, name, engine, sink), memory=True, driver_cpu=True,
                )  # fmt: skip
    found = interleaved(rounds, runs, each=("processing_s", "driver_mib", "driver_cpu_s"))
    rows = [{"engine": e, "sink": s, "keys": k, **figures} for (e, s, k), figures in found.items()]
    return {
        "lines": lines,
        "batches": batches,
        "rounds": rounds,
        "changed_keys": {label: changed_keys(lines, fresh) for label, fresh in SIZES.items()},
        "rows": rows,
        "floor": pg_floor(lines, 3),
    }


def _row(rows: list[dict[str, Any]], engine: str, sink: str, keys: str) -> dict[str, Any]:
    return next(r for r in rows if (r["engine"], r["sink"], r["keys"]) == (engine, sink, keys))


def report(found: dict[str, Any]) -> list[str]:
    """The figures as markdown: per engine and sink, small against large, and the floor."""
    small, large = SIZES
    keys = found["changed_keys"]
    floor = found["floor"]["seconds"]
    lines = [
        f"Kafka, 2 s batches of {found['lines']:,} lines, local[2], console + the sink named; "
        f"{found['batches']} batches a run (2 warm-up and the last left out of the batch "
        f"times), {found['rounds']} run(s) of each, interleaved. Batches change "
        f"{keys[small]:,} keys ({small}) or {keys[large]:,} ({large}).",
        "",
        "| engine | sink | batch ~10k | batch ~490k | driver peak RSS ~10k -> ~490k | ratio "
        "| driver CPU s ~10k -> ~490k | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for engine in sorted({r["engine"] for r in found["rows"]}):
        for sink in ("files", "postgres"):
            a, b = (
                _row(found["rows"], engine, sink, small),
                _row(found["rows"], engine, sink, large),
            )
            lines.append(
                f"| {engine} | {sink} | {a['processing_s']} s | {b['processing_s']} s | "
                f"{a['driver_mib']} -> {b['driver_mib']} MiB | "
                f"{b['driver_mib'] / max(a['driver_mib'], 1):.2f} | "
                f"{a['driver_cpu_s']} -> {b['driver_cpu_s']} | "
                f"{b['driver_cpu_s'] / max(a['driver_cpu_s'], 0.01):.2f} |"
            )
    lines += [
        "",
        f"PostgreSQL's own COPY (two processes) and merge of the topic's fourth {large} batch "
        f"({found['floor']['rows']:,} rows into a table of {found['floor']['table_rows']:,}, "
        "the batches before it merged the same way), "
        f"alone: {floor} s (median of {found['floor']['runs']}: {found['floor']['runs_seconds']}).",
        "",
        "| engine | postgres / files at ~490k | postgres / (files + PostgreSQL's floor) |",
        "|---|---|---|",
    ]
    for engine in sorted({r["engine"] for r in found["rows"]}):
        files = _row(found["rows"], engine, "files", large)["processing_s"]
        pg = _row(found["rows"], engine, "postgres", large)["processing_s"]
        lines.append(f"| {engine} | {pg / files:.2f} | {pg / (files + floor):.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="runs of each [1]")
    parser.add_argument("--batches", type=int, default=6, help="batches a run [6]")
    parser.add_argument("--lines", type=int, default=60_000, help="lines a batch [60000]")
    parser.add_argument("--engines", default="dstream,structured", help="[dstream,structured]")
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    workdir = make_workdir(options.workdir, "bench-driver-")
    with broker(workdir) as bootstrap:
        found = driver_cost(
            workdir, bootstrap, options.rounds, options.batches, options.lines,
            options.engines.split(","),
        )  # fmt: skip
    found["machine"] = machine()
    write_json(workdir / "driver_cost.json", found)
    print("\n".join(report(found)))
    print(json.dumps(found["machine"]))
