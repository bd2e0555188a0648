"""The postgres sink's driver connection: one, made when needed, its tables created once.

Every call runs on it through `_run`: a connection failure is retried with backoff and a
warning per attempt (the connection made again), a failure a setting must mend is the
error that says which. `_commit` runs a body in one transaction; a connection lost during
its COMMIT leaves the transaction in doubt, and the next attempt decides from the progress
row, which the body reads under its lock. The writer (writer.py) stages and merges on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from streaming_app.common.retry import with_retries
from streaming_app.settings.rules import (
    DEFAULT_FILLFACTOR,
    STAGING_SUFFIX,
    WINDOW_SUFFIX,
    validate_table_name,
)
from streaming_app.sinks.postgres.connection import (
    Connection,
    PostgresUnavailableError,
    connect,
    identifiers,
    parse_dsn,
    redact_dsn,
    server_of,
)
from streaming_app.sinks.postgres.failures import classify, secrets_of
from streaming_app.sinks.postgres.schema import create_schema

log = logging.getLogger(__name__)

T = TypeVar("T")
S = TypeVar("S", bound="PostgresSession")


class PostgresSession:
    """A sink's connection to PostgreSQL, for one table and its companions.

    Connection failures are retried until they pass, `stop` is set (then
    StopRequestedError), or they have lasted `give_up_after` seconds (then
    PeerUnreachableError); without either, until the server is back. Other errors raise
    SinkError. Not thread-safe: one per driver thread.
    """

    def __init__(
        self,
        dsn: str,
        table: str,
        stop: threading.Event | None = None,
        connect_timeout: float = 10,
        value_type: str = "bigint",
        give_up_after: float | None = None,
        fillfactor: int = DEFAULT_FILLFACTOR,
    ) -> None:
        self.table = validate_table_name(table)
        # bigint for word counts; numeric for the keyed-sum job's exact decimal sums.
        assert value_type in ("bigint", "numeric")
        self.value_type = sql.SQL(value_type)
        self.redacted_dsn = redact_dsn(dsn)
        self._params = parse_dsn(dsn)
        self.server = server_of(self._params)
        self.connect_timeout = connect_timeout
        self.give_up_after = give_up_after
        self.fillfactor = fillfactor  # of the totals table, if this session creates it
        self._stop = stop if stop is not None else threading.Event()
        self._totals, self._progress = identifiers(table)
        self._window = identifiers(table, WINDOW_SUFFIX)[0]
        self._staging = identifiers(table, STAGING_SUFFIX)[0]
        self._conn: Connection | None = None
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.redacted_dsn!r}, {self.table!r})"

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def ensure_schema(self, retry: bool = True) -> None:
        """Create the totals, progress and staging tables if missing (safe from concurrent
        processes).

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

    def last_progress(self, sink: str = "") -> tuple[int, Any] | None:
        """The last batch written and the source position recorded with it, or None."""
        query = sql.SQL("SELECT batch_ms, source_position FROM {} WHERE sink = %s").format(
            self._progress
        )

        def read(conn: Connection) -> tuple[int, Any] | None:
            row = conn.execute(query, [sink or self.table]).fetchone()
            return None if row is None else (int(row[0]), row[1])

        return self._run("reading progress from", read)

    def close(self) -> None:
        """Close the connection; the next call connects again."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                log.debug("error closing a PostgreSQL connection", exc_info=True)

    def _commit(self, batch_ms: int, body: Callable[[Connection], bool], what: str = "") -> bool:
        """Run `body` in one transaction, retried; False if it found the batch written.

        A connection lost during COMMIT leaves the batch in doubt: the server may have
        committed it or not. The next attempt decides from the progress row, which `body`
        reads under its lock, so after the doubtful transaction has ended either way.
        """
        committing = in_doubt = False

        def write(conn: Connection) -> bool:
            nonlocal committing, in_doubt
            in_doubt, committing = in_doubt or committing, False
            with conn.transaction():
                written = body(conn)
                committing = True  # leaving the block sends COMMIT
            committing = False
            return written

        written = self._run(f"writing {what}batch_time_ms={batch_ms} to", write)
        if in_doubt:
            log.warning(
                "batch_time_ms=%d: the connection to PostgreSQL at %s (table %s) broke during "
                "its COMMIT; the progress row shows %s",
                batch_ms,
                self.server,
                self.table,
                "it was not committed: written now" if written else "it committed: not rewritten",
            )
        return written

    def _run(self, action: str, work: Callable[[Connection], T]) -> T:
        """`work` on the connection, retried (`action` names it in the warnings)."""
        return self._retried(action, lambda: self._attempt(work))

    def _retried(self, action: str, attempt: Callable[[], T]) -> T:
        """`attempt` retried on connection failures, as the session's own."""
        return with_retries(
            f"{action} PostgreSQL at {self.server} (table {self.table})",
            attempt,
            self._stop,
            retry_on=(PostgresUnavailableError,),
            give_up_after=self.give_up_after,
            setting="postgres_give_up_after",
            peer="postgres",
        )

    def _attempt(self, work: Callable[[Connection], T]) -> T:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self._params, self.connect_timeout)
            if not self._schema_ready:
                create_schema(
                    self._conn,
                    self.table,
                    self._totals,
                    self._progress,
                    self.value_type,
                    self._staging,
                    self.fillfactor,
                )
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
