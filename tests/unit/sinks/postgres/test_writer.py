"""The PostgreSQL sink without a server: names, DSN redaction, retries and error classes."""

from __future__ import annotations

import logging
import threading
from typing import Any
from unittest import mock

import psycopg
import pytest

from streaming_app.errors import EXIT_USAGE, SinkError, StopRequestedError
from streaming_app.sinks.postgres import session as pg_sink
from streaming_app.sinks.postgres.writer import PostgresWriter, redact_dsn, validate_table_name

REFUSED = (
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: '
    "Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?"
)


@pytest.mark.parametrize(
    "name", ["totals", "_t1", "Word_Totals", "public.totals", "s_1._x", "t" * 54]
)
def test_valid_table_names_are_returned_unchanged(name: str) -> None:
    assert validate_table_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "1abc", "a-b", "a b", "a.b.c", ".t", "t.", "t;drop table x", "wört", "s" * 64 + ".t"],
)
def test_invalid_table_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="is not a table name"):
        validate_table_name(name)


def test_a_table_name_leaves_room_for_the_progress_table() -> None:
    with pytest.raises(ValueError, match="at most 54 characters"):
        validate_table_name("t" * 55)


@pytest.mark.parametrize(
    ("dsn", "redacted"),
    [
        ("postgresql://user:secret@host/db", "postgresql://user:***@host/db"),
        ("postgres://user:s%40c:r@h1:5432,h2:5433/db", "postgres://user:***@h1:5432,h2:5433/db"),
        ("postgresql://user@host/db", "postgresql://user@host/db"),
        ("postgresql://host/db", "postgresql://host/db"),
        ("host=h password=secret dbname=db", "host=h password=*** dbname=db"),
        ("host=h password='a b' dbname=db", "host=h password=*** dbname=db"),
        (r"host=h password='it\'s here' user=u", "host=h password=*** user=u"),
        (r"password=a\ b user=u", "password=*** user=u"),
        ("password = 'x y'  host=h", "password = ***  host=h"),
        ("host=h sslpassword=k password=", "host=h sslpassword=*** password=***"),
        ("host=h password='unterminated secret", "host=h password=***"),
        ("host=h user=password dbname=db", "host=h user=password dbname=db"),
        ("host=h password hunter2", "host=h password ***"),
    ],
)
def test_redact_dsn_masks_every_password(dsn: str, redacted: str) -> None:
    assert redact_dsn(dsn) == redacted


def test_query_passwords_are_masked() -> None:
    assert redact_dsn("postgresql://u@h/db?sslmode=require&password=x&application_name=a") == (
        "postgresql://u@h/db?sslmode=require&password=***&application_name=a"
    )
    assert redact_dsn("postgresql://u:p@h/db?password=x") == "postgresql://u:***@h/db?password=***"


def test_an_invalid_dsn_is_a_setting_to_fix_that_shows_no_password() -> None:
    with pytest.raises(SinkError, match="invalid PostgreSQL DSN") as raised:
        PostgresWriter("host=h password='hunter2", "totals")
    assert "hunter2" not in str(raised.value)
    with pytest.raises(SinkError) as raised:
        PostgresWriter("host=h password hunter2", "totals")
    assert "hunter2" not in str(raised.value)
    assert str(raised.value).startswith("postgres_dsn: invalid PostgreSQL DSN")
    assert raised.value.exit_code == EXIT_USAGE  # a restart would not help


class NoWait(threading.Event):
    """A stop event that records the backoff delays instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0)
        return self.is_set()


def fake_connection(last_batch_ms: int = 1234, rows: int = 1) -> Any:
    """A connection whose queries answer one row: (last_batch_ms, no position), and say
    they touched `rows` rows (the merge of one staged row each).

    The schema check's query about the count column's type answers bigint.
    """
    conn = mock.MagicMock(name="connection")
    conn.closed = False
    conn.info.encoding = "utf-8"
    conn.info.parameter_status.return_value = "UTF8"

    def execute(query: Any, params: Any = None) -> Any:
        result = mock.MagicMock(name="cursor")
        column_type = isinstance(query, str) and "information_schema" in query
        result.fetchone.return_value = ("bigint",) if column_type else (last_batch_ms, None)
        result.rowcount = rows
        return result

    conn.execute.side_effect = execute
    return conn


def connect_sequence(monkeypatch: pytest.MonkeyPatch, outcomes: list[Any]) -> list[Any]:
    """Make pg_sink connect with each outcome in turn (an exception is raised)."""
    calls: list[Any] = []

    def connect(params: Any, timeout: float) -> Any:
        calls.append(params)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(pg_sink, "connect", connect)
    return calls


def test_connection_failures_are_retried_with_a_warning_per_attempt(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    failure = psycopg.OperationalError(REFUSED + " (password s3cret-pw)")
    calls = connect_sequence(monkeypatch, [failure, failure, failure, fake_connection(42)])
    stop = NoWait()
    writer = PostgresWriter("postgresql://app:s3cret-pw@127.0.0.1:5432/test", "totals", stop)
    with caplog.at_level(logging.WARNING):
        assert writer.last_batch_ms() == 42
    assert len(calls) == 4  # a new connection per attempt
    assert stop.waits == [1, 2, 4]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4  # three failures and the recovery
    for attempt, message in enumerate(warnings[:3], start=1):
        assert f"failed (attempt {attempt})" in message
        assert "PostgreSQL at 127.0.0.1:5432 (table totals)" in message
        assert "Connection refused" in message
    assert "succeeded after 3 failed attempts" in warnings[3]
    assert "s3cret-pw" not in caplog.text


def test_a_connection_lost_mid_transaction_reconnects(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = fake_connection()
    broken.execute.side_effect = psycopg.OperationalError("server closed the connection")
    good = fake_connection(last_batch_ms=1000)
    calls = connect_sequence(monkeypatch, [broken, good])
    writer = PostgresWriter("postgresql://u@127.0.0.1/test", "totals", NoWait())
    assert writer.write_batch(2000, iter([("a", 1)]), {"kafka": [["t", 0, 5]]}) is True
    broken.close.assert_called_once()
    assert len(calls) == 2
    # the rows of the retry are the ones given, though they came as an iterator
    copy = good.cursor.return_value.copy.return_value.__enter__.return_value
    copy.write_row.assert_called_once_with(("totals", 2000, 0, "a", 1))
    writer.close()
    good.close.assert_called_once()


def test_a_plan_decides_from_the_locked_progress_row(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = fake_connection(last_batch_ms=5000)  # a newer batch time than the one written
    connect_sequence(monkeypatch, [conn])
    seen: list[Any] = []

    def plan(previous: Any) -> bool | None:
        seen.append(previous)
        return False  # not a replay, though its batch time is older: the plan decides

    writer = PostgresWriter("postgresql://u@127.0.0.1/test", "totals", NoWait())
    assert writer.write_batch(2000, [("a", 1)], {"context": "q", "batch_id": 1}, plan=plan)
    assert seen == [(5000, None)]
    queries = [str(call.args[0]) for call in conn.execute.call_args_list]
    assert any("FOR UPDATE" in q for q in queries)
    assert not any("t WHERE NOT EXISTS" in q for q in queries)  # False: no replace
    assert writer.write_batch(2000, [("a", 1)], plan=lambda previous: None) is False


def test_setting_stop_ends_the_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = NoWait()

    def refuse(params: Any, timeout: float) -> Any:
        if len(stop.waits) == 2:
            stop.set()
        raise psycopg.OperationalError(REFUSED)

    monkeypatch.setattr(pg_sink, "connect", refuse)
    writer = PostgresWriter("host=127.0.0.1 port=6543 dbname=test", "totals", stop)
    with pytest.raises(StopRequestedError, match=r"gave up on staging .*127\.0\.0\.1:6543"):
        writer.write_batch(1000, [("a", 1)])
    assert len(stop.waits) == 2


@pytest.mark.parametrize(
    ("error", "hint"),
    [
        ('FATAL:  password authentication failed for user "app"', "check the user and password"),
        ('FATAL:  database "nope" does not exist', "create the database"),
        ('FATAL:  role "app" does not exist', "check the user"),
        ("fe_sendauth: no password supplied", "check the user and password"),
    ],
)
def test_errors_a_retry_cannot_fix_are_not_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, error: str, hint: str
) -> None:
    failure = psycopg.OperationalError(f"connection failed: connection to server at x: {error}")
    calls = connect_sequence(monkeypatch, [failure, fake_connection()])
    stop = NoWait()
    writer = PostgresWriter("postgresql://app:s3cret-pw@127.0.0.1/nope", "totals", stop)
    with pytest.raises(SinkError) as raised:
        writer.write_batch(1000, [("a", 1)])
    message = str(raised.value)
    assert raised.value.exit_code == EXIT_USAGE  # a setting to fix: a restart cannot help
    assert "\n" not in message
    assert hint in message
    assert "postgresql://app:***@127.0.0.1/nope" in message
    assert "s3cret-pw" not in message
    assert (len(calls), stop.waits) == (1, [])
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_sql_errors_are_sink_errors_with_the_sqlstate_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = fake_connection()
    conn.execute.side_effect = psycopg.errors.InsufficientPrivilege("permission denied for schema")
    connect_sequence(monkeypatch, [conn])
    writer = PostgresWriter("postgresql://u@127.0.0.1/test", "s.totals", NoWait())
    with pytest.raises(SinkError, match="grant the DSN's user rights"):
        writer.ensure_schema()
    conn.close.assert_called_once()


def test_the_writer_never_shows_the_password() -> None:
    writer = PostgresWriter("host=127.0.0.1 password=s3cret-pw", "totals")
    assert "s3cret-pw" not in repr(writer)
    assert writer.server == "127.0.0.1:5432"
