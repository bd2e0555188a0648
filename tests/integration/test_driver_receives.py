"""What the sinks bring to the driver: counts and a top N a partition at most, never rows.

Every sink of both engines (files, console, postgres; the totals, a table replaced after a
gap, the sliding window; word counts and keyed sums) runs here on real Spark (local mode)
and a real PostgreSQL, over batches that change KEYS keys, while a spy records what every
action that returns data to the driver (RDD `collect`, `take`, `takeOrdered`, ...,
DataFrame `collect`, `toArrow`, `toPandas`, ...) returned. Spark's own `takeOrdered` and
`reduce` collect one result a partition, so they are seen too. The test fails if a sink
brings more of the batch's keys to the driver than the console's top N of each
partition, and checks that what the sinks wrote is exact.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streaming_app.jobs.text import add_counts, count_words, update_count
from streaming_app.sinks.files_layout import WINDOW, read_totals, totals_name
from streaming_app.sinks.postgres.writer import read_totals as read_pg_totals
from streaming_app.state.buckets import by_bucket, merge_parts, next_state

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 2
BUCKETS = 16
KEYS = 4000  # keys a batch changes
TOP_N = 3
BATCH_MS = 1000


@dataclass
class Spy:
    """The keys the driver received, counted where an action returned them: the innermost
    spied call (takeOrdered's partitions' tops, as its own collect returned them)."""

    keys: set[str]
    seen: Counter[str] = field(default_factory=Counter)
    calls: Counter[str] = field(default_factory=Counter)
    # Per thread (the two queries' foreachBatch calls run at once): the spied calls under
    # way, each with whether it made a spied call of its own.
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, action: str, run: Any) -> Any:
        stack = self._local.__dict__.setdefault("stack", [])
        if stack:
            stack[-1] = True
        stack.append(False)
        try:
            result = run()
        finally:
            nested = stack.pop()
        if not nested:
            received = [found for found in _strings(result) if found in self.keys]
            with self._lock:
                self.calls[action] += 1
                self.seen.update(received)
        return result

    def keys_received(self) -> int:
        return sum(self.seen.values())


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """Every string in a (nested) result: lists, tuples, Rows, dicts, Arrow tables."""
    if isinstance(value, str):
        yield value
    elif hasattr(value, "to_pylist") and depth < 4:  # a pyarrow table or array
        yield from _strings(value.to_pylist(), depth + 1)
    elif hasattr(value, "to_dict") and hasattr(value, "columns"):  # a pandas frame
        yield from _strings(value.to_dict("list"), depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, depth + 1)
            yield from _strings(item, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _strings(item, depth + 1)


RDD_ACTIONS = ("collect", "take", "takeOrdered", "top", "first", "collectAsMap", "takeSample")
FRAME_ACTIONS = ("collect", "take", "head", "first", "tail", "toArrow", "toPandas")


@pytest.fixture
def spy(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    """Every driver-side action of RDDs and DataFrames, recorded; iterating refused."""
    from pyspark import RDD

    # The class of the session's frames (Spark 4's classic DataFrame overrides the API's).
    DataFrame = type(spark.range(1))  # noqa: N806 (a class)
    found = Spy(set())

    def wrap(owner: type, name: str) -> None:
        original = getattr(owner, name)

        def spied(self: Any, *args: Any, **kwargs: Any) -> Any:
            return found.call(f"{owner.__name__}.{name}", lambda: original(self, *args, **kwargs))

        monkeypatch.setattr(owner, name, spied)

    for name in RDD_ACTIONS:
        wrap(RDD, name)
    for name in FRAME_ACTIONS:
        wrap(DataFrame, name)
    monkeypatch.setattr(RDD, "toLocalIterator", _refused)
    monkeypatch.setattr(DataFrame, "toLocalIterator", _refused)
    yield found


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a sink iterates over rows on the driver")


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(f"local[{PARTITIONS}]")
        .appName("test-driver-receives")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _words(rng: random.Random, round_no: int) -> list[str]:
    """KEYS distinct words, new and old ones mixed, a few repeated (for the top)."""
    fresh = [f"r{round_no}k{i}" for i in range(KEYS // 2)]
    old = [f"k{i}" for i in rng.sample(range(KEYS * 2), KEYS // 2)]
    return fresh + old + ["hot"] * (round_no + 5) + ["warm"] * 3


def _lines(words: list[str]) -> list[str]:
    return [" ".join(words[i : i + 10]) for i in range(0, len(words), 10)]


def _batch(sc: Any, lines: list[str]) -> Any:
    counted = sc.parallelize(lines, 3).mapPartitions(count_words)
    bucketed = counted.mapPartitions(partial(by_bucket, buckets=BUCKETS))
    return bucketed.partitionBy(PARTITIONS).mapPartitions(
        partial(merge_parts, reduce=add_counts), preservesPartitioning=True
    )


def test_the_dstream_sinks_bring_no_rows_to_the_driver(
    spark: Any, spy: Spy, tmp_path: Path, pg_dsn: str, pg_schema: str
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
        spy.keys |= set(words)
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
        before = spy.keys_received()
        write_totals(t, state, view, files)
        write_console(t, state, view, TOP_N)
        write_postgres(t, state, target, view)
        write_postgres(t, with_changes(t, plain_state, counts), keyless)  # state_buckets = 0
        write_window_files(t, window, str(out), 10)
        write_window_console(t, window, TOP_N)
        write_window_postgres(t, window, WindowTarget(table))
        received = spy.keys_received() - before
        # The console lines' tops: TOP_N keys a partition, twice (totals, window).
        assert received <= 2 * TOP_N * PARTITIONS, (received, spy.seen.most_common(5))
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


def _wait(what: str, check: Any, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.5)


def test_the_structured_sinks_bring_no_rows_to_the_driver(
    spark: Any,
    spy: Spy,
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
            "window": "2",
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
            spy.keys |= set(words)
            temp = tmp_path / f"f{round_no}.tmp"
            temp.write_text("\n".join(_lines(words)) + "\n")
            temp.rename(inputs / f"f{round_no}.txt")
            expected = dict(totals)
            _wait(f"round {round_no}", partial(_pg_reached, pg_dsn, table, expected))
            time.sleep(1.5)  # the next round in a later window
        _wait("a window in files", lambda: list(out.glob("window-*")))
        _wait("a window in postgres", lambda: _pg_totals(pg_dsn, table, True))
    finally:
        for query in queries:
            query.stop()
    assert read_totals(str(out))[1] == dict(totals)
    printed = capsys.readouterr().out.splitlines()
    lines = [line for line in printed if line.startswith(("Counts at", "Window at"))]
    assert any(line.startswith("Window at") for line in lines)
    received = spy.keys_received()
    # Only the console lines' tops: TOP_N keys a partition, each line.
    assert 0 < received <= len(lines) * TOP_N * PARTITIONS, (received, len(lines))


def _pg_reached(dsn: str, table: str, expected: dict[str, Any]) -> bool:
    return _pg_totals(dsn, table) == expected


def _pg_totals(dsn: str, table: str, window: bool = False) -> dict[str, Any]:
    from streaming_app.errors import SinkError

    try:
        return read_pg_totals(dsn, table, window)
    except SinkError:  # no table yet
        return {}
