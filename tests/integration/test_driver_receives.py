"""What the sinks bring to the driver: counts and a top N a partition at most, never rows.

Every sink of both engines (files, console, postgres; the totals, a table replaced after a
gap, the sliding window; word counts and keyed sums) runs here on real Spark (local mode)
and a real PostgreSQL, over batches that change KEYS keys. Whatever form a sink would
bring rows in (keys, lines, JSON, CSV, Rows, Arrow, an accumulator), they reach the driver
as its tasks' results, and Spark's event log records each task's result size: beyond its
metrics (METRIC_BYTES an accumulator update), no task may return more than VALUE_BYTES,
where one partition's share of a batch's changed keys is twice that and more; a
sink's call runs at most 2 x PARTITIONS tasks (DStreams), a query's job 4 x PARTITIONS.
A spy on the driver's Python actions (RDD `collect`, `take`, `takeOrdered`, ..., DataFrame
`collect`, `toArrow`, `toPandas`, ...) counts what they returned, pickled: the digests'
and the console's tops, a few hundred bytes a sink. The test also checks that what the
sinks wrote is exact. Its control, tests/controls/driver-collects-delta.patch, collects
the files delta's lines on the driver.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streaming_app.jobs.text import add_counts, count_words, update_count
from streaming_app.sinks.files_layout import WINDOW, read_totals, totals_name
from streaming_app.sinks.postgres.writer import read_totals as read_pg_totals
from streaming_app.state.buckets import batch_buckets, next_state
from streaming_app.structured.windows import WINDOW_QUERY
from tests.integration.batch_waits import wait_window_past
from tests.integration.driver_spy import Spy, spy_on
from tests.integration.harness import wait_for
from tests.integration.spark_local import local_session
from tests.integration.task_results import event_log_settings, received

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 2
BUCKETS = 16
KEYS = 4000  # keys a batch changes
# What a task's result may hold beyond its metrics: a count, a digest, a top N, a file
# write's commit message (its paths: 3.7 KiB at most here). One partition's share of a
# batch's changed keys, in any form, is twice that and more (KEYS / PARTITIONS keys: the
# delta's lines 17 KiB, a broadcast of the keys 12 KiB).
VALUE_BYTES = 6 * 1024
TOP_N = 3
BATCH_MS = 1000
WINDOW_MS = 2000  # the structured test's window


@pytest.fixture
def spy(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    """Every driver-side action of RDDs and DataFrames, recorded; iterating refused."""
    yield from spy_on(spark, monkeypatch)


@pytest.fixture(scope="module")
def event_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's event log directory: what each task returned to the driver."""
    return tmp_path_factory.mktemp("event-log")


@pytest.fixture(scope="module")
def spark(event_log: Path) -> Iterator[Any]:
    conf = {
        "spark.sql.shuffle.partitions": str(PARTITIONS),
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        **event_log_settings(event_log),
    }  # fmt: skip
    with local_session("test-driver-receives", conf, cores=PARTITIONS) as session:
        yield session


def _words(rng: random.Random, round_no: int) -> list[str]:
    """KEYS distinct words, new and old ones mixed, a few repeated (for the top)."""
    fresh = [f"r{round_no}k{i}" for i in range(KEYS // 2)]
    old = [f"k{i}" for i in rng.sample(range(KEYS * 2), KEYS // 2)]
    return fresh + old + ["hot"] * (round_no + 5) + ["warm"] * 3


def _lines(words: list[str]) -> list[str]:
    return [" ".join(words[i : i + 10]) for i in range(0, len(words), 10)]


def _batch(sc: Any, lines: list[str]) -> Any:
    return batch_buckets(sc.parallelize(lines, 3).mapPartitions(count_words), BUCKETS, PARTITIONS)


def test_the_dstream_sinks_bring_no_rows_to_the_driver(
    spark: Any, spy: Spy, event_log: Path, tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    from streaming_app.sinks.console import write_console, write_window_console
    from streaming_app.sinks.files import FilesSettings, write_totals, write_window_files
    from streaming_app.sinks.postgres.stream import (
        PostgresTarget,
        WindowTarget,
        configure_postgres,
        with_changes,
        write_postgres,
        write_window_postgres,
    )
    from streaming_app.state.view import StateView

    sc = spark.sparkContext
    configure_postgres(pg_dsn, threading.Event())
    out = tmp_path / "out"
    files = FilesSettings(str(out), 10, 3 * BATCH_MS, BATCH_MS, "ctx")
    view = StateView(bucketed=True, add=add_counts)
    table, keyless_table = f"{pg_schema}.wc", f"{pg_schema}.wc_keyless"
    target = PostgresTarget(table, "socket", str(tmp_path / "ckpt"), BATCH_MS, "ctx")
    keyless = PostgresTarget(keyless_table, "socket", str(tmp_path / "ckpt"), BATCH_MS, "ctx")
    rng = random.Random(43)
    state, totals = None, Counter[str]()
    plain_state = None
    for round_no in range(1, 4):  # a base (the first), then deltas
        words = _words(rng, round_no)
        totals.update(words)
        lines = _lines(words)
        batch = _batch(sc, lines)
        state = next_state(datetime.now(), state, batch, PARTITIONS, update_count, TOP_N).cache()
        state.count()
        counts = sc.parallelize(lines, PARTITIONS).flatMap(str.split).map(lambda w: (w, 1))
        counts = counts.reduceByKey(add_counts).cache()
        plain = counts if plain_state is None else plain_state.union(counts)
        plain_state = plain.reduceByKey(add_counts).cache()
        window = counts  # a window of one batch: every key of it
        t = datetime.fromtimestamp(round_no * BATCH_MS / 1000)
        sinks = {
            "files": partial(write_totals, t, state, view, files),
            "console": partial(write_console, t, state, view, TOP_N),
            "postgres": partial(write_postgres, t, state, target, view),
            "postgres, one record a key": partial(
                write_postgres, t, with_changes(t, plain_state, counts), keyless
            ),
            "files window": partial(write_window_files, t, window, str(out), 10),
            "console window": partial(write_window_console, t, window, TOP_N),
            "postgres window": partial(write_window_postgres, t, window, WindowTarget(table)),
        }
        before = spy.bytes
        for sink, write in sinks.items():
            group = f"round {round_no}: {sink}"
            sc.setJobGroup(group, group)
            write()
            got = received(event_log, sc.statusTracker().getJobIdsForGroup(group))
            assert got.tasks <= 2 * PARTITIONS, f"{group}: {got}"
            assert got.largest_value <= VALUE_BYTES, f"{group}: {got}"
        sc.setJobGroup("", "")
        # The digests and the console lines' tops: a few records a partition, each sink.
        assert spy.bytes - before <= len(sinks) * PARTITIONS * TOP_N * 100, spy.bytes - before
    assert read_totals(str(out)) == (3 * BATCH_MS, dict(totals))
    assert read_pg_totals(pg_dsn, table) == dict(totals)
    assert read_pg_totals(pg_dsn, keyless_table) == dict(totals)
    assert read_pg_totals(pg_dsn, table, window=True) == dict(Counter(words))
    window_dir = out / totals_name(3 * BATCH_MS, WINDOW)
    window_lines = "".join(p.read_text() for p in sorted(window_dir.glob("part-*")))
    assert dict(line.split("\t") for line in window_lines.splitlines()) == {
        w: str(n) for w, n in Counter(words).items()
    }
    assert spy.calls  # the spy saw the sinks' small jobs


def test_the_structured_sinks_bring_no_rows_to_the_driver(
    spark: Any,
    spy: Spy,
    event_log: Path,
    tmp_path: Path,
    pg_dsn: str,
    pg_schema: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from streaming_app.settings.loading import load_config
    from streaming_app.sinks.postgres.stream import configure_postgres
    from streaming_app.structured.query import start_query
    from streaming_app.structured.windows import start_window_query

    table = f"{pg_schema}.wc"
    inputs, out = tmp_path / "in", tmp_path / "out"
    windows = tmp_path / "ckpt" / WINDOW_QUERY  # the window query's checkpoint
    inputs.mkdir()
    config = load_config(
        env={},
        cli={
            "engine": "structured",
            "source": "files",
            "input_dir": str(inputs),
            "checkpoint_dir": str(tmp_path / "ckpt"),
            "output_dir": str(out),
            "sinks": "files,console,postgres",
            "postgres_table": table,
            "postgres_dsn": pg_dsn,
            "batch_interval": "1",
            "window": str(WINDOW_MS // 1000),
            "top_n": str(TOP_N),
            "snapshot_interval": "2",
        },
    )
    configure_postgres(pg_dsn, threading.Event())
    queries = [start_query(spark, config), start_window_query(spark, config)]
    rng = random.Random(47)
    totals = Counter[str]()
    try:
        for round_no in range(1, 5):
            words = _words(rng, round_no)
            totals.update(words)
            temp = tmp_path / f"f{round_no}.tmp"
            temp.write_text("\n".join(_lines(words)) + "\n")
            temp.rename(inputs / f"f{round_no}.txt")
            expected = dict(totals)
            reached = partial(_pg_reached, pg_dsn, table, expected)
            wait_for(f"round {round_no} in postgres", reached, 180, pause=0.5)
            # The next file in a later window (batches of 1 s).
            wait_window_past(windows, f"f{round_no}.txt", WINDOW_MS, 1000)
        wait_for("a window in files", lambda: list(out.glob("window-*")), 180, pause=0.5)
        wait_for("a window in postgres", lambda: _pg_totals(pg_dsn, table, True), 180, pause=0.5)
    finally:
        for query in queries:
            query.stop()
    assert read_totals(str(out))[1] == dict(totals)
    printed = capsys.readouterr().out.splitlines()
    lines = [line for line in printed if line.startswith(("Counts at", "Window at"))]
    assert any(line.startswith("Window at") for line in lines)
    # The console lines' tops, the staging tasks' counts: a few records a partition, a line.
    assert 0 < spy.bytes <= len(lines) * 2048, (spy.bytes, spy.records, len(lines))
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup
    for query in queries:  # Spark runs a query's jobs in the group of its run id
        got = received(event_log, jobs(str(query.runId)))
        name = query.name or "totals"
        assert got.jobs > 0 and got.widest_job <= 4 * PARTITIONS, f"{name}: {got}"
        assert got.largest_value <= VALUE_BYTES, f"{name}: {got}"


def _pg_reached(dsn: str, table: str, expected: dict[str, Any]) -> bool:
    return _pg_totals(dsn, table) == expected


def _pg_totals(dsn: str, table: str, window: bool = False) -> dict[str, Any]:
    from streaming_app.errors import SinkError

    try:
        return read_pg_totals(dsn, table, window)
    except SinkError:  # no table yet
        return {}
