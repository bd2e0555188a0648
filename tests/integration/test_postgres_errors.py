"""A postgres table the job cannot use ends the run with one line: at start, or in a batch."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.integration.conftest import files_args
from tests.integration.harness import App, drop_file, make_text, truth
from tests.integration.pg_helpers import postgres_config, wait_for_pg_totals

pytestmark = pytest.mark.timeout(300)
# What Spark prints when a batch's output fails: its log line, and stack traces.
NOISE = ("Traceback", "JobScheduler", "at org.apache", "Exception")


def the_one_error_line(app: App) -> str:
    """The app's only `Error:` line, after checking it printed no trace of any kind."""
    output = app.log() + app.out_path.read_text("utf-8")
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output[-4000:]
    for noise in NOISE:
        assert noise not in output, output[-4000:]
    return errors[0]


def test_a_table_of_the_wrong_type_is_refused_at_start_in_one_line(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    table = f"{pg_schema}.wc"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (word text PRIMARY KEY, count text NOT NULL,"
                " last_batch_ms bigint NOT NULL)"
            ).format(sql.Identifier(pg_schema, "wc"))
        )
    config = postgres_config(tmp_path, pg_dsn)
    args = ["--sink", "postgres", "--postgres-table", table, "--config", str(config)]
    app = start_app(*files_args(dirs, *args))
    assert app.wait(timeout=120) == 2  # a setting to change: supervise does not restart it
    error = the_one_error_line(app)
    assert error == (
        f"Error: PostgreSQL table {table} has a text count column, but this job writes bigint "
        "(word counts: bigint; keyed-sum: numeric); use another postgres_table for this job"
    )
    assert "Started new streaming context" not in app.log()  # found before Spark started


def test_an_app_error_in_a_batch_ends_the_run_in_one_line_and_a_restart_is_exact(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_table: str, tmp_path: Path
) -> None:
    rng = random.Random(7)
    texts: list[str] = []
    args = files_args(
        dirs,
        "--sink", "postgres", "--postgres-table", pg_table,
        "--config", str(postgres_config(tmp_path, pg_dsn)),
    )  # fmt: skip

    def add(name: str) -> None:
        texts.append(make_text(rng, 20))
        drop_file(dirs["input"], name, texts[-1].encode())

    app = start_app(*args)
    app.wait_for_log(r"Started new streaming context")
    add("1.txt")
    wait_for_pg_totals(pg_dsn, pg_table, truth(texts))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # someone drops the table
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(pg_table)))
    add("2.txt")  # its batch's write fails: not retried, a SinkError on the driver
    assert app.wait(timeout=120) == 1
    error = the_one_error_line(app)
    assert error.startswith(f"Error: PostgreSQL sink {pg_table} at "), error
    assert "the sink's tables are missing" in error

    app = start_app(*args)  # as supervise would: the table is made again, whole
    app.wait_for_log(r"Recovered streaming context from checkpoint")
    add("3.txt")
    wait_for_pg_totals(pg_dsn, pg_table, truth(texts))
    assert app.terminate() == 0
