"""The PostgreSQL sink against a real server: exactly-once batches, atomicity, failures."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import psycopg
import pytest
from prometheus_client import generate_latest
from psycopg import sql

from streaming_app.common import retry
from streaming_app.common.prometheus import start_endpoint, stop_endpoint
from streaming_app.errors import SinkError, StopRequestedError
from streaming_app.sinks.postgres.staging import copy_rows
from streaming_app.sinks.postgres.writer import PostgresWriter, read_progress, read_totals
from tests.integration import pg_helpers
from tests.integration.harness import wait_for

pytestmark = pytest.mark.timeout(120)
pg_dsn = pg_helpers.pg_dsn
pg_table = pg_helpers.pg_table


def exists(dsn: str, table: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
        return bool(row and row[0])


def table_rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    """Every row of the totals table and of the progress table, in a stable order."""
    with psycopg.connect(dsn) as conn:
        totals = conn.execute(
            sql.SQL("SELECT * FROM {} ORDER BY word").format(sql.Identifier(table))
        ).fetchall()
        progress = conn.execute(
            sql.SQL("SELECT * FROM {}").format(sql.Identifier(table + "_progress"))
        ).fetchall()
    return totals + progress


def test_batches_write_absolute_totals_and_progress(pg_dsn: str, pg_table: str) -> None:
    assert not exists(pg_dsn, pg_table)
    position = {"kafka": [["words", 0, 123], ["words", 1, 7]]}
    with PostgresWriter(pg_dsn, pg_table) as writer:
        assert writer.write_batch(1000, [("a", 1), ("b", 2), ("c", 3)], position)
        assert exists(pg_dsn, pg_table)
        assert exists(pg_dsn, pg_table + "_progress")
        assert read_totals(pg_dsn, pg_table) == {"a": 1, "b": 2, "c": 3}
        later = {"kafka": [["words", 0, 130], ["words", 1, 7]]}
        assert writer.write_batch(3000, iter([("b", 5), ("d", 1)]), later)
        assert writer.last_batch_ms() == 3000
        progress = read_progress(pg_dsn, pg_table)
        assert progress is not None
        assert (progress["batch_ms"], progress["source_position"], progress["rows_written"]) == (
            3000,
            later,
            2,
        )
        assert writer.write_batch(4000, [], None)
    assert read_totals(pg_dsn, pg_table) == {"a": 1, "b": 5, "c": 3, "d": 1}
    with psycopg.connect(pg_dsn) as conn:
        last: dict[str, int] = dict(
            conn.execute(
                sql.SQL("SELECT word, last_batch_ms FROM {}").format(sql.Identifier(pg_table))
            ).fetchall()
        )
    assert last == {"a": 1000, "b": 3000, "c": 1000, "d": 3000}
    progress = read_progress(pg_dsn, pg_table)
    assert progress is not None  # an empty batch still moves the progress on
    assert (progress["batch_ms"], progress["source_position"], progress["rows_written"]) == (
        4000,
        None,
        0,
    )
    with PostgresWriter(pg_dsn, pg_table) as writer:  # a restarted driver sees the progress
        assert writer.last_batch_ms() == 4000


def test_replace_makes_the_table_exactly_the_given_totals(pg_dsn: str, pg_table: str) -> None:
    with PostgresWriter(pg_dsn, pg_table) as writer:
        assert writer.write_batch(1000, [("a", 5), ("b", 2), ("stale", 9)], {"context": "old"})
        # A restored context's first batch: all its totals, and only those.
        assert writer.write_batch(2000, [("a", 3), ("c", 1)], {"context": "new"}, replace=True)
        assert read_totals(pg_dsn, pg_table) == {"a": 3, "c": 1}
        assert writer.last_progress() == (2000, {"context": "new"})
        assert writer.write_batch(3000, [], None, replace=True)
    assert read_totals(pg_dsn, pg_table) == {}


def test_replayed_and_older_batches_change_nothing(pg_dsn: str, pg_table: str) -> None:
    with PostgresWriter(pg_dsn, pg_table) as writer:
        assert writer.write_batch(1000, [("a", 1)], {"kafka": [["t", 0, 1]]})
        assert writer.write_batch(2000, [("a", 2), ("b", 1)], {"kafka": [["t", 0, 3]]})
    before = table_rows(pg_dsn, pg_table)
    time.sleep(0.01)  # so that a rewrite would show in updated_at
    with PostgresWriter(pg_dsn, pg_table) as writer:  # as after a driver crash
        assert not writer.write_batch(2000, [("a", 2), ("b", 1)], {"kafka": [["t", 0, 3]]})
        assert not writer.write_batch(2000, [("a", 99)], None)
        assert not writer.write_batch(1000, [("a", 1)], {"kafka": [["t", 0, 1]]})
        assert not writer.write_batch(500, [("z", 5)], None)
    assert table_rows(pg_dsn, pg_table) == before
    assert read_totals(pg_dsn, pg_table) == {"a": 2, "b": 1}


def test_concurrent_schema_creation(pg_dsn: str, pg_table: str) -> None:
    errors: list[BaseException] = []

    def create() -> None:
        try:
            with PostgresWriter(pg_dsn, pg_table) as writer:
                writer.ensure_schema()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert exists(pg_dsn, pg_table)


def pages_kept(dsn: str, table: str, fillfactor: int | None) -> tuple[str, float]:
    """Create `table` (at `fillfactor`, or the default), write 600 words, update every one,
    and return the table's storage options and the share of words whose new version is on
    its old page: a heap-only (HOT) update, which touches no index, needs room there."""
    options = {} if fillfactor is None else {"fillfactor": fillfactor}
    words = [f"w{i:04d}" for i in range(600)]
    with PostgresWriter(dsn, table, **options) as writer:
        writer.write_batch(1000, [(w, 1) for w in words])
        page = sql.SQL("SELECT word, (ctid::text::point)[0] FROM {}").format(sql.Identifier(table))
        with psycopg.connect(dsn) as conn:
            before = dict(conn.execute(page).fetchall())
        writer.write_batch(2000, [(w, 2) for w in words])
    with psycopg.connect(dsn) as conn:
        after = dict(conn.execute(page).fetchall())
        row = conn.execute(
            "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = %s::regclass",
            [table],
        ).fetchone()
    assert row is not None
    return row[0] or "", sum(before[w] == after[w] for w in words) / len(words)


def test_a_new_totals_table_leaves_room_for_a_batchs_updates(pg_dsn: str, pg_table: str) -> None:
    """The default fillfactor (50): every word's update stays on its page. The positive
    control, a table at 100 (PostgreSQL's default, and the sink's before it set one): most
    words' new versions go to other pages, found by the same probe."""
    assert pages_kept(pg_dsn, pg_table, None) == ("fillfactor=50", 1.0)
    full = pg_table + "_full"
    try:
        options, kept = pages_kept(pg_dsn, full, 100)
        assert options == "fillfactor=100"
        assert kept < 0.5, kept
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {}, {}, {}, {}").format(
                    *(sql.Identifier(full + suffix)
                      for suffix in ("", "_progress", "_window", "_staging"))
                )
            )  # fmt: skip


def check_whole_batch(conn: psycopg.Connection[Any], table: str) -> int:
    """Read totals and progress in one REPEATABLE READ snapshot, check they are of one
    batch, and return its number (0 before the first)."""
    with conn.transaction():
        progress = conn.execute(
            sql.SQL(
                "SELECT batch_ms, source_position, rows_written FROM {} WHERE sink = %s"
            ).format(sql.Identifier(table + "_progress")),
            [table],
        ).fetchone()
        totals = conn.execute(
            sql.SQL("SELECT word, count, last_batch_ms FROM {}").format(sql.Identifier(table))
        ).fetchall()
    if progress is None:
        assert totals == []
        return 0
    batch_ms, position, rows_written = progress
    batch = int(batch_ms) // 1000
    # Every word holds the value of the batch the progress row names, and was last written
    # by it: a word from another batch, or a progress row ahead of or behind the totals,
    # is a batch seen half-written.
    assert sorted(totals) == [(w, batch, batch_ms) for w in "abcd"], (progress, totals)
    assert position == {"batch": batch}
    assert rows_written == 4
    return batch


def test_readers_see_only_whole_batches(pg_dsn: str, pg_table: str) -> None:
    batches = 50
    writer = PostgresWriter(pg_dsn, pg_table)
    writer.ensure_schema()
    done = threading.Event()
    readers_ready = threading.Barrier(5)
    seen: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                seen.append(check_whole_batch(conn, pg_table))
                readers_ready.wait()
                while not done.is_set():
                    seen.append(check_whole_batch(conn, pg_table))
                seen.append(check_whole_batch(conn, pg_table))
        except BaseException as exc:
            errors.append(exc)
            readers_ready.abort()

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    try:
        readers_ready.wait(timeout=30)
        for k in range(1, batches + 1):
            assert writer.write_batch(k * 1000, [(w, k) for w in "abcd"], {"batch": k})
    finally:
        done.set()
        for reader in readers:
            reader.join()
        writer.close()
    assert errors == []
    assert seen.count(batches) >= 4
    assert len(set(seen)) > 2  # the readers did overlap the writes
    assert read_totals(pg_dsn, pg_table) == dict.fromkeys("abcd", batches)


def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "BACKOFF_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(retry, "BACKOFF_MAX_SECONDS", 0.2)


def test_a_dropped_connection_is_reopened_and_the_batch_written_once(
    pg_dsn: str, pg_table: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    short_backoff(monkeypatch)
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, application_name=pg_table)
    with PostgresWriter(dsn, pg_table) as writer:
        assert writer.write_batch(1000, [("a", 1)])
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            terminated = admin.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                " WHERE application_name = %s",
                [pg_table],
            ).fetchall()
        assert terminated == [(True,)]
        served = start_endpoint("127.0.0.1", 0, {"app_job": "wordcount", "sinks": "postgres"})
        try:
            with caplog.at_level(logging.WARNING):
                assert writer.write_batch(2000, [("a", 3), ("b", 1)])
            # The retried attempt is counted for the alert on sink retries; the write timed.
            text = generate_latest(served.registry).decode()
        finally:
            stop_endpoint()
    assert "failed (attempt 1)" in caplog.text
    assert read_totals(pg_dsn, pg_table) == {"a": 3, "b": 1}
    assert 'streaming_app_retries_total{peer="postgres"} 1.0' in text
    assert 'streaming_app_operation_duration_seconds_count{operation="postgres"} 1.0' in text


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_retried_until_stopped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    short_backoff(monkeypatch)
    port = closed_port()
    stop = threading.Event()
    writer = PostgresWriter(f"postgresql://app:s3cret-pw@127.0.0.1:{port}/test", "t", stop, 2)
    outcome: list[BaseException] = []

    def write() -> None:
        try:
            writer.write_batch(1000, [("a", 1)])
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=write)
    with caplog.at_level(logging.WARNING):
        thread.start()
        try:
            attempts = "failed (attempt"
            wait_for("3 failed attempts", lambda: caplog.text.count(attempts) >= 3, 30, pause=0.05)
        finally:
            stop.set()
            thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], StopRequestedError), outcome
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) >= 3
    for message in warnings:
        assert f"127.0.0.1:{port}" in message
    assert "s3cret-pw" not in caplog.text
    assert "s3cret-pw" not in str(outcome[0])


def test_a_missing_database_is_a_sink_error_without_retries(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    missing = psycopg.conninfo.make_conninfo(
        pg_dsn, dbname="no_such_db_streaming_app", password="s3cret-pw"
    )
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(SinkError) as raised:
        PostgresWriter(missing, "totals").write_batch(1000, [("a", 1)])
    message = str(raised.value)
    assert time.monotonic() - started < 10
    assert "\n" not in message
    assert 'database "no_such_db_streaming_app" does not exist' in message
    assert "create the database" in message
    assert "password=***" in message and "s3cret-pw" not in message
    assert "failed (attempt" not in caplog.text
    with pytest.raises(SinkError, match="does not exist"):
        read_totals(missing, "totals")


def test_exact_sums_and_windows_and_a_table_of_the_other_job_is_refused(
    pg_dsn: str, pg_table: str
) -> None:
    from decimal import Decimal

    with PostgresWriter(pg_dsn, pg_table, value_type="numeric") as writer:
        writer.ensure_schema()
        big = Decimal("100000000000000000000000000000.000000000000000000000000000001")
        assert writer.write_batch(1000, [("c1", big), ("c2", Decimal("-0.05"))])
        assert writer.write_window(1000, [("c1", Decimal("1.10"))])
        assert not writer.write_window(1000, [("c1", Decimal("9"))])  # a replay: unchanged
        assert writer.write_window(3000, [])  # an empty window empties the table
    assert read_totals(pg_dsn, pg_table) == {"c1": big, "c2": Decimal("-0.05")}
    assert read_totals(pg_dsn, pg_table, window=True) == {}
    with PostgresWriter(pg_dsn, pg_table) as counts, pytest.raises(SinkError) as caught:
        counts.ensure_schema()
    assert "has a numeric count column, but this job writes bigint" in str(caught.value)


def test_the_staging_table_stays_one_batch_in_size_without_autovacuum(pg_dsn: str) -> None:
    """Each merge deletes its staged rows; the writer's VACUUM reclaims them, so the table
    does not grow by a batch a batch when autovacuum is off or behind (this server's is
    off: `SHOW autovacuum`), and the next batch's scans read no dead rows. A database of
    its own: another test's open transaction would keep the deleted rows from VACUUM."""
    table, sizes = "wc", []
    staging = sql.Identifier(table + "_staging")
    with pg_helpers.fresh_database(pg_dsn, "UTF8") as dsn:
        with PostgresWriter(dsn, table) as writer, psycopg.connect(dsn, autocommit=True) as conn:
            writer.ensure_schema()
            conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(staging))
            for batch in range(1, 6):
                rows = [(f"b{batch}-{i}", i) for i in range(3000)]
                assert writer.write_batch(batch * 1000, rows)
                sizes.append(relation_size(conn, staging))
            # One batch's rows as the tasks stage them, in a table of the same columns.
            conn.execute(sql.SQL("CREATE TABLE one (LIKE {})").format(staging))
            with conn.cursor().copy("COPY one FROM STDIN") as copy:
                for word, count in rows:
                    copy.write_row((table, 5000, 0, word, count))
            one_batch = relation_size(conn, sql.Identifier("one"))
        assert read_totals(dsn, table)["b5-2999"] == 2999
    assert max(sizes) <= one_batch, (sizes, one_batch)  # without the VACUUM: 5 by the end


def relation_size(conn: psycopg.Connection[Any], table: sql.Identifier) -> int:
    found = conn.execute(sql.SQL("SELECT pg_relation_size('{}')").format(table)).fetchone()
    assert found is not None
    return int(found[0])


def test_a_partition_staged_twice_is_merged_once(pg_dsn: str, pg_table: str) -> None:
    # A task run again after its first attempt committed its COPY (its executor lost before
    # it reported, or a speculative copy): the second attempt replaces the first's rows.
    rows = [("a", 1), ("b", 2)]
    with PostgresWriter(pg_dsn, pg_table) as writer:
        writer.ensure_schema()
        target = writer.staging_target(1000)
        for _attempt in range(2):
            with psycopg.connect(pg_dsn) as conn:
                staged = copy_rows(conn, target, 0, rows)
        assert writer.merge_staged(1000, {0: staged})
    assert read_totals(pg_dsn, pg_table) == {"a": 1, "b": 2}
