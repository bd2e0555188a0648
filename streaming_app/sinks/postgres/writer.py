"""PostgreSQL sink: each batch's changed word totals and its progress row in one transaction."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from streaming_app.common.prometheus import timed
from streaming_app.common.retry import with_retries
from streaming_app.errors import SinkSetupError
from streaming_app.settings.rules import PROGRESS_SUFFIX, WINDOW_SUFFIX, validate_table_name
from streaming_app.sinks.postgres.failures import classify, first_line, secrets_of
from streaming_app.sinks.postgres.schema import (
    CLIENT_ENCODING,
    SCHEMA_LOCK,
    create_schema,
    create_window_table,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = psycopg.Connection[tuple[Any, ...]]
# A progress row as read under its lock: the batch time and the source position recorded.
Progress = tuple[int, Any]
# Given the locked progress row (None before the first batch): None if the batch is already
# written (a replay), else whether its rows are all the totals (replace) or the changes.
Plan = Callable[[Progress | None], bool | None]

# Keepalives and a TCP user timeout turn a vanished server into an error within about a
# minute instead of a hang of the OS default (hours). A DSN may override them.
_CONNECT_DEFAULTS = {
    "application_name": "streaming-app",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}
# The server's side of the same keepalives, set for the sink's session: a session whose
# client vanished while the server waited for its next statement (a COMMIT lost on the
# way) would otherwise keep its transaction, and the progress row's lock with it, until
# the server's own TCP keepalive gives up (two hours by default); every later attempt of
# the batch would wait for that lock. Set with SET, not the startup `options`, which
# poolers such as PgBouncer refuse.
_SERVER_KEEPALIVES = (
    ("keepalives_idle", "tcp_keepalives_idle"),
    ("keepalives_interval", "tcp_keepalives_interval"),
    ("keepalives_count", "tcp_keepalives_count"),
)
_URI = re.compile(r"(\s*postgres(?:ql)?://)([^/?#]*)(.*)", re.IGNORECASE | re.DOTALL)
_QUERY_PASSWORD = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
# The "=" is optional so that a malformed "password secret" is masked too.
_KEYWORD_PASSWORD = re.compile(
    r"((?:^|(?<=\s))(?:ssl)?password\s*=?\s*)('(?:\\.|[^'\\])*(?:'|\\?)|(?:\\.|[^\s\\])*\\?)",
    re.IGNORECASE | re.DOTALL,
)


class PostgresUnavailableError(ConnectionError):
    """PostgreSQL cannot be reached or dropped the connection: worth retrying."""


def redact_dsn(dsn: str) -> str:
    """The DSN (URI or key=value form) with every password shown as ***."""
    uri = _URI.fullmatch(dsn)
    if uri is None:
        return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    scheme, netloc, rest = uri.groups()
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    return scheme + netloc + _QUERY_PASSWORD.sub(r"\1***", rest)


def _parse_dsn(dsn: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        shown = redact_dsn(dsn)
        # libpq quotes the piece it cannot parse, which may hold a password: show a quoted
        # piece only if the redacted DSN shows it anyway.
        reason = re.sub(r'"([^"]*)"', lambda m: m[0] if m[1] in shown else '"***"', first_line(exc))
        # A setting to fix (exit 2): a supervisor's restart would fail the same way.
        raise SinkSetupError(
            f"postgres_dsn: invalid PostgreSQL DSN {shown}: {reason}; fix the DSN"
        ) from None


def _server(params: Mapping[str, Any]) -> str:
    host = params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "socket"
    return f"{host}:{params.get('port') or os.environ.get('PGPORT') or 5432}"


def _connect(params: Mapping[str, Any], timeout: float) -> Connection:
    # The client encoding is the sink's, whatever the DSN or PGCLIENTENCODING say: with the
    # database's default, a SQL_ASCII database returns text as bytes (schema.py).
    options = {
        **_CONNECT_DEFAULTS,
        **params,
        "client_encoding": CLIENT_ENCODING,
        "connect_timeout": max(1, math.ceil(timeout)),
    }
    conn = psycopg.connect(autocommit=True, **options)
    try:
        settings = [(server, str(options[client])) for client, server in _SERVER_KEEPALIVES]
        query = ", ".join("set_config(%s, %s, false)" for _ in settings)
        conn.execute(f"SELECT {query}", [value for pair in settings for value in pair])
    except BaseException:
        conn.close()
        raise
    return conn


def _identifiers(table: str, suffix: str = "") -> tuple[sql.Identifier, sql.Identifier]:
    schema, _, name = validate_table_name(table).rpartition(".")
    prefix = [schema] if schema else []
    return sql.Identifier(*prefix, name + suffix), sql.Identifier(*prefix, name + PROGRESS_SUFFIX)


class PostgresWriter:
    """Writes batches of absolute word totals exactly once per batch time.

    Connection failures are retried until they pass, `stop` is set (then
    StopRequestedError), or they have lasted `give_up_after` seconds (then
    PeerUnreachableError); without either, until the server is back. Other errors raise
    SinkError. Not thread-safe: one writer per driver thread.
    """

    def __init__(
        self,
        dsn: str,
        table: str,
        stop: threading.Event | None = None,
        connect_timeout: float = 10,
        value_type: str = "bigint",
        give_up_after: float | None = None,
    ) -> None:
        self.table = validate_table_name(table)
        # bigint for word counts; numeric for the keyed-sum job's exact decimal sums.
        assert value_type in ("bigint", "numeric")
        self.value_type = sql.SQL(value_type)
        self.redacted_dsn = redact_dsn(dsn)
        self._params = _parse_dsn(dsn)
        self.server = _server(self._params)
        self.connect_timeout = connect_timeout
        self.give_up_after = give_up_after
        self._stop = stop if stop is not None else threading.Event()
        self._totals, self._progress = _identifiers(table)
        self._window = _identifiers(table, WINDOW_SUFFIX)[0]
        self._conn: Connection | None = None
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"PostgresWriter({self.redacted_dsn!r}, {self.table!r})"

    def __enter__(self) -> PostgresWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def ensure_schema(self, retry: bool = True) -> None:
        """Create the totals and progress tables if missing (safe from concurrent processes).

        SinkSetupError if they or the database do not suit the job. Without `retry`, one
        attempt: an unreachable server raises PostgresUnavailableError.
        """
        if retry:
            self._run("creating tables in", lambda conn: None)
        else:
            self._attempt(lambda conn: None)

    def last_batch_ms(self) -> int | None:
        """The batch time of the last batch written, or None before the first."""
        progress = self.last_progress()
        return None if progress is None else progress[0]

    def last_progress(self) -> tuple[int, Any] | None:
        """The last batch written and the source position recorded with it, or None."""
        query = sql.SQL("SELECT batch_ms, source_position FROM {} WHERE sink = %s").format(
            self._progress
        )

        def read(conn: Connection) -> tuple[int, Any] | None:
            row = conn.execute(query, [self.table]).fetchone()
            return None if row is None else (int(row[0]), row[1])

        return self._run("reading progress from", read)

    def write_batch(
        self,
        batch_ms: int,
        rows: Iterable[tuple[str, Any]],
        source_position: Any = None,
        replace: bool = False,
        plan: Plan | None = None,
    ) -> bool:
        """Write the batch's totals and progress in one transaction; False if already written.

        By default a batch time at or before the recorded one is a replay: it changes
        nothing. With `replace`, the rows are all the totals: words not among them are
        deleted. `plan`, if given, decides both from the progress row, read under its lock
        in the same transaction (it may raise SinkError, which rolls the transaction back).
        """
        staged = list(rows)  # a retry writes the same rows again, so an iterator is read once
        # Non-ASCII as it is: a SQL_ASCII database refuses jsonb's \u escapes above 007F.
        position = (
            None if source_position is None else json.dumps(source_position, ensure_ascii=False)
        )

        def by_time(previous: Progress | None) -> bool | None:
            return None if previous is not None and previous[0] >= batch_ms else replace

        # A connection lost during COMMIT leaves the batch in doubt: the server may have
        # committed it or not. The next attempt decides from the progress row, which it
        # reads under its lock, so after the doubtful transaction has ended either way.
        committing = in_doubt = False

        def write(conn: Connection) -> bool:
            nonlocal committing, in_doubt
            in_doubt, committing = in_doubt or committing, False
            with conn.transaction():
                written = self._write(conn, batch_ms, staged, position, plan or by_time)
                committing = True  # leaving the block sends COMMIT
            committing = False
            return written

        with timed("postgres"):
            written = self._run(f"writing batch_time_ms={batch_ms} to", write)
        if in_doubt:
            log.warning(
                "batch_time_ms=%d: the connection to PostgreSQL at %s (table %s) broke during "
                "its COMMIT; the progress row shows %s",
                batch_ms,
                self.server,
                self.table,
                "it was not committed: written now" if written else "it committed: not rewritten",
            )
        if written:
            log.debug("wrote batch_time_ms=%d rows=%d table=%s", batch_ms, len(staged), self.table)
        else:
            log.debug("skipped batch_time_ms=%d: already written to %s", batch_ms, self.table)
        return written

    def close(self) -> None:
        """Close the connection; the next call connects again."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                log.debug("error closing a PostgreSQL connection", exc_info=True)

    def _run(self, action: str, work: Callable[[Connection], T]) -> T:
        return with_retries(
            f"{action} PostgreSQL at {self.server} (table {self.table})",
            lambda: self._attempt(work),
            self._stop,
            retry_on=(PostgresUnavailableError,),
            give_up_after=self.give_up_after,
            setting="postgres_give_up_after",
            peer="postgres",
        )

    def _attempt(self, work: Callable[[Connection], T]) -> T:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = _connect(self._params, self.connect_timeout)
            if not self._schema_ready:
                create_schema(self._conn, self.table, self._totals, self._progress, self.value_type)
                self._schema_ready = True
            return work(self._conn)
        except psycopg.Error as exc:
            self.close()  # whatever state the session is in, the next attempt starts afresh
            reason, hint, error = classify(exc, secrets_of(self._params))
            if hint is None:
                raise PostgresUnavailableError(reason) from exc
            raise error(
                f"PostgreSQL sink {self.table} at {self.redacted_dsn}: {reason}; {hint}"
            ) from exc

    def write_window(self, batch_ms: int, rows: Iterable[tuple[str, Any]]) -> bool:
        """Replace `<table>_window` by the window ending at batch_ms; False if not newer."""
        staged = list(rows)
        sink = self.table + WINDOW_SUFFIX

        def write(conn: Connection) -> bool:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [SCHEMA_LOCK])
                create_window_table(conn, self._window, self.value_type)
                previous = self._lock_progress(conn, batch_ms, sink)
                if previous is not None and previous[0] >= batch_ms:
                    return False
                conn.execute(sql.SQL("DELETE FROM {}").format(self._window))
                copy_rows = sql.SQL("COPY {} (word, count, window_end_ms) FROM STDIN")
                with conn.cursor().copy(copy_rows.format(self._window)) as copy:
                    for word, count in staged:
                        copy.write_row((word, count, batch_ms))
                conn.execute(
                    sql.SQL(
                        "UPDATE {} SET batch_ms = %s, rows_written = %s, updated_at = now()"
                        " WHERE sink = %s"
                    ).format(self._progress),
                    [batch_ms, len(staged), sink],
                )
                return True

        return self._run(f"writing the window at batch_time_ms={batch_ms} to", write)

    def _lock_progress(self, conn: Connection, batch_ms: int, sink: str = "") -> Progress | None:
        """Lock this sink's progress row (inserting it if absent); what it records, if any."""
        sink = sink or self.table
        select = sql.SQL("SELECT batch_ms, source_position FROM {} WHERE sink = %s FOR UPDATE")
        insert = sql.SQL(
            "INSERT INTO {} (sink, batch_ms, rows_written) VALUES (%s, %s, 0)"
            " ON CONFLICT (sink) DO NOTHING RETURNING sink"
        )
        while True:  # twice at most: an insert loses only to a row committed meanwhile
            row = conn.execute(select.format(self._progress), [sink]).fetchone()
            if row is not None:
                return int(row[0]), row[1]
            params = [sink, batch_ms]
            if conn.execute(insert.format(self._progress), params).fetchone() is not None:
                return None  # our uncommitted row: other writers wait on its key

    def _write(
        self,
        conn: Connection,
        batch_ms: int,
        rows: list[tuple[str, Any]],
        position: str | None,
        plan: Plan,
    ) -> bool:
        replace = plan(self._lock_progress(conn, batch_ms))
        if replace is None:
            return False
        if replace and not rows:
            conn.execute(sql.SQL("DELETE FROM {}").format(self._totals))
        if rows:
            conn.execute(
                sql.SQL(
                    "CREATE TEMPORARY TABLE pg_temp.streaming_app_staging"
                    " (word text NOT NULL, count {} NOT NULL) ON COMMIT DROP"
                ).format(self.value_type)
            )
            with conn.cursor().copy(
                "COPY pg_temp.streaming_app_staging (word, count) FROM STDIN"
            ) as copy:
                for row in rows:
                    copy.write_row(row)
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (word, count, last_batch_ms)"
                    " SELECT word, count, %s FROM pg_temp.streaming_app_staging"
                    " ON CONFLICT (word) DO UPDATE"
                    " SET count = EXCLUDED.count, last_batch_ms = EXCLUDED.last_batch_ms"
                ).format(self._totals),
                [batch_ms],
            )
            if replace:
                conn.execute(
                    sql.SQL(
                        "DELETE FROM {} t WHERE NOT EXISTS"
                        " (SELECT 1 FROM pg_temp.streaming_app_staging s WHERE s.word = t.word)"
                    ).format(self._totals)
                )
        conn.execute(
            sql.SQL(
                "UPDATE {} SET batch_ms = %s, source_position = %s::jsonb, rows_written = %s,"
                " updated_at = now() WHERE sink = %s"
            ).format(self._progress),
            [batch_ms, position, len(rows), self.table],
        )
        return True


def _query(dsn: str, table: str, query: sql.Composed, params: list[Any]) -> list[tuple[Any, ...]]:
    """The rows of one query on a new connection; any failure is a SinkError."""
    conninfo = _parse_dsn(dsn)
    try:
        with _connect(conninfo, 10) as conn:
            return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        reason, hint, error = classify(exc, secrets_of(conninfo))
        raise error(
            f"cannot read PostgreSQL sink {table} at {redact_dsn(dsn)}: {reason}; "
            f"{hint or 'is the server up and reachable?'}"
        ) from exc


def read_totals(dsn: str, table: str, window: bool = False) -> dict[str, Any]:
    """Every word's total in the sink's table (or its count in the `_window` table)."""
    totals, _ = _identifiers(table, WINDOW_SUFFIX if window else "")
    rows = _query(dsn, table, sql.SQL("SELECT word, count FROM {}").format(totals), [])
    return {str(word): count if isinstance(count, Decimal) else int(count) for word, count in rows}


def read_progress(dsn: str, table: str) -> dict[str, Any] | None:
    """The sink's progress row (batch_ms, source_position, rows_written, updated_at), if any."""
    _, progress = _identifiers(table)
    query = sql.SQL(
        "SELECT batch_ms, source_position, rows_written, updated_at FROM {} WHERE sink = %s"
    ).format(progress)
    rows = _query(dsn, table, query, [table])
    if not rows:
        return None
    return dict(
        zip(("batch_ms", "source_position", "rows_written", "updated_at"), rows[0], strict=True)
    )
