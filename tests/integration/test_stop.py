"""A stop whose batch is stuck (a locked table) ends hard after stop_timeout; nothing is lost."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from streaming_app.sinks.postgres.writer import read_totals as read_pg_totals
from streaming_app.tools.processes import group_gone
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for, wait_for_totals
from tests.integration.pg_helpers import postgres_config, wait_for_pg_totals

pytestmark = pytest.mark.timeout(300)
STOP_TIMEOUT = 6


def _waiting_on(conn: psycopg.Connection[Any], table: str, timeout: float = 60) -> None:
    """Wait until another session waits for a lock on `table` (the sink's batch is stuck)."""

    def waiting() -> bool:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
            [table],
        ).fetchone()
        return bool(row and row[0])

    wait_for(f"a batch waiting for the lock on {table}", waiting, timeout)


def test_a_stuck_batch_is_stopped_hard_after_stop_timeout_and_nothing_is_lost(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_table: str, tmp_path: Path
) -> None:
    rng = random.Random(11)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, 30))
        drop_file(dirs["input"], name, texts[-1].encode())

    args = files_args(
        dirs,
        "--sink", "postgres", "--postgres-table", pg_table,
        "--config", str(postgres_config(tmp_path, pg_dsn)),
    )  # fmt: skip
    app = start_app(*args, "--stop-timeout", str(STOP_TIMEOUT))
    app.wait_for_log(r"Started new streaming context")
    add("1.txt")
    wait_for_pg_totals(pg_dsn, pg_table, truth(texts))

    with psycopg.connect(pg_dsn) as locker:
        locker.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(pg_table))
        )
        add("2.txt")
        _waiting_on(locker, pg_table)
        started = time.monotonic()
        assert app.terminate(timeout=STOP_TIMEOUT + 60) == 0
        took = time.monotonic() - started
        locker.rollback()
    log = app.log()
    assert f"did not finish within stop_timeout={STOP_TIMEOUT} s; stopping hard" in log, log[-3000:]
    assert "Stopped (hard)" in log
    assert STOP_TIMEOUT - 1 <= took <= STOP_TIMEOUT + 30, took
    assert group_gone(app.proc.pid), "the JVM or Python workers outlived the hard stop"
    assert "Traceback" not in log, "the hard stop printed tracebacks"

    app = start_app(*args)  # the default stop_timeout: not a setting of the checkpoint
    app.wait_for_log(r"Recovered streaming context from checkpoint")
    add("3.txt")
    wait_for_pg_totals(pg_dsn, pg_table, truth(texts))
    wait_for_totals(dirs["output"], truth(texts), app)
    # Recovery replays every interval since the last checkpoint (the stuck batch's 30 s
    # and more); a graceful stop finishes them all, so let it catch up first.
    app.wait_caught_up(timeout=120)
    assert app.terminate() == 0
    assert "stopping hard" not in app.log()
    assert read_pg_totals(pg_dsn, pg_table) == truth(texts)
