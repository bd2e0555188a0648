"""The postgres sink's staging table under kill -9: of the driver between staging and merge,
then of the executors' Python workers during the staging write; and its staged rows emptied
between staging and merge (as a restart of the server empties an UNLOGGED table). All end
exact.

The DStream engine (files source, files and postgres sinks) runs in local mode against the
local server. The driver is held between the two steps at its merge's
first row (a row trigger on the sink's table that waits for an advisory lock the
test holds: batches without rows pass), the executors inside their COPY by the same
trigger on the staging table.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from streaming_app.settings.rules import STAGING_SUFFIX
from tests.integration.conftest import files_args
from tests.integration.harness import App, drop_file, make_text, truth, wait_for
from tests.integration.log_lines import CONTEXT_RECOVERED, CONTEXT_STARTED
from tests.integration.pg_helpers import postgres_config, wait_for_pg_totals

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
HOLD_KEY = 43


def sessions_waiting(dsn: str, name: str, event: str) -> list[tuple[Any, ...]]:
    """The sessions of `name` (application_name) waiting on lock wait event `event`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT pid, client_addr FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock' AND wait_event = %s",
            [name, event],
        ).fetchall()


def staged_rows(dsn: str, table: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        staging = sql.Identifier(*table.split(".")[:-1], table.split(".")[-1] + STAGING_SUFFIX)
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(staging)).fetchone()
        return int(row[0]) if row else 0


@contextmanager
def rows_held(dsn: str, table: str) -> Iterator[None]:
    """Every row written to `table` waits, inside its statement, for an advisory lock the
    test holds: a row trigger that takes the lock shared."""
    schema, name = table.split(".")
    function = sql.Identifier(schema, f"hold_{name}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " PERFORM pg_advisory_xact_lock_shared({}); RETURN NEW; END $$"
            ).format(function, sql.Literal(HOLD_KEY))
        )
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER hold BEFORE INSERT OR UPDATE ON {} FOR EACH ROW"
                " EXECUTE FUNCTION {}()"
            ).format(sql.Identifier(schema, name), function)
        )
        conn.execute("SELECT pg_advisory_lock(%s)", [HOLD_KEY])
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [HOLD_KEY])
            conn.execute(sql.SQL("DROP TRIGGER hold ON {}").format(sql.Identifier(schema, name)))


def python_workers(app: App) -> list[int]:
    """The app's Python workers and their daemon: processes of its session running Python
    that are not the driver."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == app.proc.pid:
            continue
        try:
            if os.getsid(int(entry.name)) != app.proc.pid:
                continue
            cmdline = (entry / "cmdline").read_bytes()
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
        if b"worker_daemon" in cmdline or b"pyspark.daemon" in cmdline:
            found.append(int(entry.name))
    return found


def run_args(dirs: dict[str, Path], tmp_path: Path, dsn: str, table: str) -> list[str]:
    config = postgres_config(tmp_path, dsn)
    return files_args(
        dirs, "--sink", "postgres", "--postgres-table", table, "--config", str(config)
    )  # fmt: skip


@dataclass
class Run:
    """The app's command line and the texts it was given, file by file."""

    dirs: dict[str, Path]
    dsn: str
    table: str
    args: list[str]
    rng: random.Random
    texts: list[str] = field(default_factory=list)

    def add(self, name: str) -> None:
        self.texts.append(make_text(self.rng, 30))
        drop_file(self.dirs["input"], name, self.texts[-1].encode())

    def exact(self) -> None:
        wait_for_pg_totals(self.dsn, self.table, truth(self.texts), timeout=240)


def started(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path, dsn: str, table: str, seed: int
) -> tuple[Run, App]:
    """The app started, and its first file's totals in the table (the progress row too)."""
    run = Run(dirs, dsn, table, run_args(dirs, tmp_path, dsn, table), random.Random(seed))
    app = start_app(*run.args)
    app.wait_for_log(CONTEXT_STARTED)
    run.add("a.txt")
    run.exact()
    return run, app


def test_kill_9_of_the_driver_between_staging_and_merge_and_of_the_executors_mid_copy(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    run, app = started(dirs, start_app, tmp_path, pg_dsn, f"{pg_schema}.wc", 53)
    table = run.table

    # The driver killed between the two steps: the rows staged, the merge held.
    with rows_held(pg_dsn, table):
        run.add("b.txt")
        wait_for(
            "the merge held",
            lambda: sessions_waiting(pg_dsn, "streaming-app", "advisory"),
            pause=0.05,
        )
        assert staged_rows(pg_dsn, table) > 0
        app.kill9()
    assert staged_rows(pg_dsn, table) > 0  # left by the crash, until the batch is merged
    app = start_app(*run.args)
    app.wait_for_log(CONTEXT_RECOVERED)
    run.add("c.txt")
    run.exact()
    assert staged_rows(pg_dsn, table) == 0  # merged, then removed

    # The executors' Python workers killed while their tasks are inside their COPY.
    with rows_held(pg_dsn, table + STAGING_SUFFIX):
        run.add("d.txt")
        wait_for(
            "a task held in its COPY",
            lambda: sessions_waiting(pg_dsn, "streaming-app executor", "advisory"),
            pause=0.05,
        )
        workers = python_workers(app)
        assert workers, "no Python worker of the app found"
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
    # Local mode does not retry a task: the batch fails and the run ends; a supervisor
    # starts it again, and the batch is replayed. (On a cluster, Spark retries the task:
    # test_cluster_postgres.py.)
    assert app.wait(timeout=120) != 0, app.log()[-3000:]
    app = start_app(*run.args)
    app.wait_for_log(CONTEXT_RECOVERED)
    run.add("e.txt")
    run.exact()
    assert app.terminate() == 0, app.log()[-3000:]
    assert staged_rows(pg_dsn, table) == 0
    assert "Traceback" not in app.log()


def progress_locked(dsn: str, table: str) -> psycopg.Connection[Any]:
    """A connection in a transaction holding the sink's progress row FOR UPDATE: the
    driver's merge, whose first statement locks that row, waits until it commits."""
    conn = psycopg.connect(dsn)
    schema, name = table.split(".")
    conn.execute(
        sql.SQL("SELECT 1 FROM {} FOR UPDATE").format(sql.Identifier(schema, name + "_progress"))
    )
    return conn


def test_staged_rows_emptied_between_staging_and_merge_are_staged_again(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    run, app = started(dirs, start_app, tmp_path, pg_dsn, f"{pg_schema}.wc", 59)
    table = run.table

    # b.txt's batch held in its staging COPY (so no other batch runs), the progress row
    # locked, the COPY let go: the staged rows committed, the merge waits for the row.
    with rows_held(pg_dsn, table + STAGING_SUFFIX):
        run.add("b.txt")
        waiting = partial(sessions_waiting, pg_dsn, "streaming-app executor", "advisory")
        wait_for("b.txt's batch held in its COPY", waiting, 180, app, 0.05)
        lock = progress_locked(pg_dsn, table)
    with lock:
        waiting = partial(sessions_waiting, pg_dsn, "streaming-app", "transactionid")
        wait_for("the merge waiting for the progress row", waiting, 180, app, 0.05)
        staging = sql.Identifier(pg_schema, "wc" + STAGING_SUFFIX)
        emptied = lock.execute(sql.SQL("DELETE FROM {}").format(staging)).rowcount
        assert emptied > 0  # b.txt's rows, staged and committed by the tasks
    # The merge finds them missing, rolls back and stages the batch again.
    app.wait_for_log(
        rf"staged rows of table {table} missing: 0 of the {emptied} rows its tasks staged"
        r" .*Staging the batch again \(attempt 2 of 3\)"
    )
    run.exact()
    run.add("c.txt")
    run.exact()
    assert staged_rows(pg_dsn, table) == 0
    assert app.terminate() == 0, app.log()[-3000:]
    assert "Traceback" not in app.log()
