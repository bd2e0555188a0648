"""`run --engine structured --window 6 --slide 2 --sink postgres` through kill -9 of the
driver: the totals and every window PostgreSQL held are exact.

The totals and window queries write at the same time, each through a writer of its own
(test_postgres_query_writers.py shows why). While files arrive, a reader polls
`<table>_window` (replaced whole, one window at a time); each window it saw is then
compared with the window of the files each of the window query's micro-batches read (its
logs: test_structured_windows.py), and the totals with every file.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from streaming_app.settings.rules import WINDOW_SUFFIX
from streaming_app.structured.windows import WINDOW_QUERY
from tests.integration.batch_waits import wait_window_past
from tests.integration.harness import drop_file, make_text, truth, wait_for, windows_of
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED
from tests.integration.test_structured_postgres import structured_pg_args, wait_for_pg_totals
from tests.integration.test_structured_windows import WINDOW_MS, structured_batches

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


def window_now(dsn: str, table: sql.Identifier) -> tuple[int, dict[str, int]] | None:
    """The window the table holds (its end and counts), None while it is empty or absent."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(
                sql.SQL("SELECT word, count, window_end_ms FROM {}").format(table)
            ).fetchall()
    except psycopg.errors.UndefinedTable:
        return None
    if not rows:
        return None
    ends = {int(end) for _, _, end in rows}
    assert len(ends) == 1, f"rows of windows {sorted(ends)} at once"
    return ends.pop(), {str(word): int(count) for word, count, _ in rows}


def window_recorded(dsn: str, table: str) -> int:
    """The end of the last window written (its progress row, sink `<table>_window`), or 0."""
    schema, name = table.split(".")
    query = sql.SQL("SELECT batch_ms FROM {} WHERE sink = %s").format(
        sql.Identifier(schema, name + "_progress")
    )
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(query, [table + WINDOW_SUFFIX]).fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return 0 if row is None else int(row[0])


def wait_for_window(dsn: str, table: str, end_ms: int, app: Any, timeout: float = 120) -> None:
    """Wait until a window ending at `end_ms` or later is written."""

    def written() -> bool:
        return window_recorded(dsn, table) >= end_ms

    wait_for(f"a window ending at {end_ms} or later", written, timeout, app)


@contextmanager
def windows_seen(dsn: str, table: str) -> Iterator[dict[int, dict[str, int]]]:
    """Every window `<table>_window` held while the block ran, by its end."""
    schema, name = table.split(".")
    identifier = sql.Identifier(schema, name + WINDOW_SUFFIX)
    seen: dict[int, dict[str, int]] = {}
    changed: list[int] = []  # windows seen with other counts later: a window written twice
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.2):
            found = window_now(dsn, identifier)
            if found is not None and seen.setdefault(*found) != found[1]:
                changed.append(found[0])

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield seen
    finally:
        stop.set()
        poller.join(timeout=30)
    last = window_now(dsn, identifier)
    if last is not None and seen.setdefault(*last) != last[1]:
        changed.append(last[0])
    assert not changed, f"windows {changed} changed once written"


def test_totals_and_windows_exact_through_kill_9_of_the_driver(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_schema: str
) -> None:
    table = f"{pg_schema}.wc"
    args = structured_pg_args(dirs, pg_dsn, table, "--window", "6", "--slide", "2")
    rng = random.Random(61)
    texts: dict[str, str] = {}

    def add(name: str) -> None:
        texts[name] = make_text(rng, rng.randint(10, 30))
        drop_file(dirs["input"], name, texts[name].encode())

    app = start_app(*args)
    app.wait_for_log(QUERY_STARTED)
    with windows_seen(pg_dsn, table) as seen:
        for i in range(12):
            add(f"f{i:02d}.txt")
            if i == 6:  # both queries write: a window is in the table
                wait_for_window(pg_dsn, table, 1, app, timeout=240)
                app.kill9()
                app = start_app(*args)
                app.wait_for_log(QUERY_RECOVERED)
            time.sleep(rng.uniform(0.8, 2.0))
        wait_for_pg_totals(pg_dsn, table, truth(list(texts.values())), app, timeout=180)
        # A window that holds f11.txt ends before last.txt.
        wait_window_past(dirs["checkpoint"] / WINDOW_QUERY, "f11.txt", 2000, 1000, app)
        add("last.txt")  # its micro-batch moves the watermark past that window: it closes
        wait_for_pg_totals(pg_dsn, table, truth(list(texts.values())), app, timeout=180)
        batches = structured_batches(dirs["checkpoint"], texts)
        f11 = next(b for b, read in batches.items() if texts["f11.txt"] in read)
        wait_for_window(pg_dsn, table, f11, app)
    assert app.terminate() == 0, app.log()[-3000:]
    assert "Traceback" not in app.log()

    batches = structured_batches(dirs["checkpoint"], texts)
    assert len(seen) >= 3, sorted(seen)
    assert max(seen) >= f11
    assert seen == windows_of(batches, sorted(seen), WINDOW_MS)
