"""PostgreSQL sink, driver side: a batch's staged rows merged with its progress row at once.

The rows of a batch reach the database without the driver: the executors COPY them into
the staging table `<table>_staging` (staging.py), a task a partition. The driver then runs
one transaction (`merge_staged`): it locks the progress row and decides from it (a replay
changes nothing; after a gap the rows are every total and replace the table), checks that
every partition's staged rows are all there (an UNLOGGED table is emptied by a crash of
the server), merges them into the table, records the batch and its source position in the
progress row, and removes the staged rows. Connection failures are retried with backoff;
a connection lost during COMMIT is decided from the progress row, read again under its
lock. `write_batch` and `write_window` do the same for rows the driver holds (the tests'
and tools' way in).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql

from streaming_app.common.prometheus import timed
from streaming_app.common.retry import with_retries
from streaming_app.errors import SinkError
from streaming_app.settings.rules import STAGING_SUFFIX, WINDOW_SUFFIX, validate_table_name
from streaming_app.sinks.postgres.connection import (
    Connection,
    PostgresUnavailableError,
    connect,
    identifiers,
    name_parts,
    parse_dsn,
    redact_dsn,
    server_of,
    with_environment,
)
from streaming_app.sinks.postgres.failures import classify, secrets_of
from streaming_app.sinks.postgres.schema import (
    SCHEMA_LOCK,
    create_schema,
    create_window_table,
)
from streaming_app.sinks.postgres.staging import StagingTarget, copy_rows, run_staging

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame

__all__ = [
    "Plan",
    "PostgresUnavailableError",
    "PostgresWriter",
    "Progress",
    "StagedRowsMissingError",
    "read_progress",
    "read_totals",
    "redact_dsn",
    "validate_table_name",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
# A progress row as read under its lock: the batch time and the source position recorded.
Progress = tuple[int, Any]
# Given the locked progress row (None before the first batch): None if the batch is already
# written (a replay), else whether its rows are all the totals (replace) or the changes.
Plan = Callable[[Progress | None], bool | None]


# How often a batch is staged before the missing staged rows end the run.
MERGE_ATTEMPTS = 3


class StagedRowsMissingError(Exception):
    """Fewer staged rows than the tasks reported (the server restarted after a crash, or
    someone deleted them): the merge is rolled back and the batch staged again."""

    def __init__(
        self, sink: str, batch_ms: int, found: int, counts: Mapping[int, int], short: list[int]
    ) -> None:
        self.sink, self.batch_ms, self.short = sink, batch_ms, short
        self.found, self.expected, self.partitions = found, sum(counts.values()), len(counts)
        super().__init__(
            f"batch_time_ms={batch_ms}: staged rows of table {sink} missing: {found} of the "
            f"{self.expected} rows its tasks staged are there ({len(short)} of "
            f"{self.partitions} partitions short: {short})"
        )


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
        self._params = parse_dsn(dsn)
        self.server = server_of(self._params)
        self.connect_timeout = connect_timeout
        self.give_up_after = give_up_after
        self._stop = stop if stop is not None else threading.Event()
        self._totals, self._progress = identifiers(table)
        self._window = identifiers(table, WINDOW_SUFFIX)[0]
        self._staging = identifiers(table, STAGING_SUFFIX)[0]
        self._conn: Connection | None = None
        self._schema_ready = False
        self._vacuum_warned = False  # a VACUUM of the staging table failed once

    def __repr__(self) -> str:
        return f"PostgresWriter({self.redacted_dsn!r}, {self.table!r})"

    def __enter__(self) -> PostgresWriter:
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

    def staging_target(self, batch_ms: int, window: bool = False) -> StagingTarget:
        """Where the executors stage a batch's rows (or a window's, by its end)."""
        return StagingTarget(
            with_environment(self._params),  # the executors lack the driver's PG* variables
            name_parts(self.table, STAGING_SUFFIX),
            self.table + WINDOW_SUFFIX if window else self.table,
            batch_ms,
            self.connect_timeout,
        )

    def stage(
        self, rows: RDD[Any] | DataFrame, batch_ms: int, window: bool = False
    ) -> dict[int, int]:
        """Stage a batch's (key, value) rows by the executors, each partition's task its own
        rows; {partition: rows}. What an earlier attempt of the batch left is removed
        first. A task's connection failure is retried as the writer's own."""
        target = self.staging_target(batch_ms, window)
        what = f"PostgreSQL sink {self.table} at {self.redacted_dsn}"

        def attempt() -> dict[int, int]:
            self._run("clearing the staged rows in", lambda conn: self._clear(conn, target))
            return run_staging(rows, target, what)

        return with_retries(
            f"staging batch_time_ms={batch_ms} in PostgreSQL at {self.server} (table {self.table})",
            attempt,
            self._stop,
            retry_on=(PostgresUnavailableError,),
            give_up_after=self.give_up_after,
            setting="postgres_give_up_after",
            peer="postgres",
        )

    def merge_staged(
        self,
        batch_ms: int,
        counts: Mapping[int, int],
        source_position: Any = None,
        replace: bool = False,
        plan: Plan | None = None,
    ) -> bool:
        """Merge the batch's staged rows and record its progress, in one transaction;
        False if the batch was written already.

        counts: each partition's staged rows, as its task reported them. By default a
        batch time at or before the recorded one is a replay: it changes nothing. With
        `replace`, the rows are all the totals: words not among them are deleted. `plan`,
        if given, decides both from the progress row, read under its lock in the same
        transaction (it may raise SinkError, which rolls the transaction back). Staged
        rows fewer than `counts` raise StagedRowsMissingError (nothing merged).
        """
        # Non-ASCII as it is: a SQL_ASCII database refuses jsonb's \u escapes above 007F.
        position = (
            None if source_position is None else json.dumps(source_position, ensure_ascii=False)
        )

        def by_time(previous: Progress | None) -> bool | None:
            return None if previous is not None and previous[0] >= batch_ms else replace

        def merge(conn: Connection) -> bool:
            return self._merge(conn, batch_ms, counts, position, plan or by_time)

        written = self._commit(batch_ms, merge)
        rows = sum(counts.values())
        if written:
            log.debug("wrote batch_time_ms=%d rows=%d table=%s", batch_ms, rows, self.table)
        else:
            log.debug("skipped batch_time_ms=%d: already written to %s", batch_ms, self.table)
        return written

    def write_staged(
        self,
        rows: RDD[Any] | DataFrame,
        batch_ms: int,
        source_position: Any = None,
        replace: bool = False,
        plan: Plan | None = None,
    ) -> bool:
        """Write a batch's (key, total) rows (an RDD, or a frame: staging.py `run_staging`)
        through the staging table: staged by the executors (`stage`), then merged
        (`merge_staged`); False if already written."""
        return self._staged(
            lambda: self.stage(rows, batch_ms),
            lambda counts: self.merge_staged(batch_ms, counts, source_position, replace, plan),
        )

    def write_window_staged(self, rows: RDD[Any] | DataFrame, batch_ms: int) -> bool:
        """Replace `<table>_window` by the window ending at batch_ms, an RDD of (key,
        count) rows staged by the executors; False if not newer than the recorded one
        (then nothing is staged)."""
        recorded = self.last_progress(self.table + WINDOW_SUFFIX)
        if recorded is not None and recorded[0] >= batch_ms:
            return False
        return self._staged(
            lambda: self.stage(rows, batch_ms, window=True),
            lambda counts: self.merge_window(batch_ms, counts),
        )

    def write_batch(
        self,
        batch_ms: int,
        rows: Iterable[tuple[str, Any]],
        source_position: Any = None,
        replace: bool = False,
        plan: Plan | None = None,
    ) -> bool:
        """`write_staged` of rows this process holds, staged by it (one partition)."""
        staged = list(rows)  # staged again on a retry, so an iterator is read once
        return self._staged(
            lambda: self._stage_here(batch_ms, staged),
            lambda counts: self.merge_staged(batch_ms, counts, source_position, replace, plan),
        )

    def merge_window(self, batch_ms: int, counts: Mapping[int, int]) -> bool:
        """Replace `<table>_window` by the window ending at batch_ms, staged by the
        executors, in one transaction; False if not newer than the recorded one."""
        sink = self.table + WINDOW_SUFFIX

        def write(conn: Connection) -> bool:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [SCHEMA_LOCK])
            create_window_table(conn, self._window, self.value_type)
            previous = self._lock_progress(conn, batch_ms, sink)
            if previous is not None and previous[0] >= batch_ms:
                return False
            conn.execute(sql.SQL("DELETE FROM {}").format(self._window))
            staged = conn.execute(
                sql.SQL(
                    "INSERT INTO {} (word, count, window_end_ms) SELECT word, count, batch_ms"
                    " FROM {} WHERE sink = %s AND batch_ms = %s"
                ).format(self._window, self._staging),
                [sink, batch_ms],
            ).rowcount
            self._check_staged(conn, sink, batch_ms, counts, staged)
            self._record(conn, sink, batch_ms, None, staged)
            return True

        return self._commit(batch_ms, write, "the window at ")

    def write_window(self, batch_ms: int, rows: Iterable[tuple[str, Any]]) -> bool:
        """`write_window_staged` of rows this process holds, staged by it."""
        staged = list(rows)
        return self._staged(
            lambda: self._stage_here(batch_ms, staged, window=True),
            lambda counts: self.merge_window(batch_ms, counts),
        )

    def close(self) -> None:
        """Close the connection; the next call connects again."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                log.debug("error closing a PostgreSQL connection", exc_info=True)

    def _staged(
        self, stage: Callable[[], dict[int, int]], merge: Callable[[dict[int, int]], bool]
    ) -> bool:
        """Stage, then merge, timed as one write of the sink (the endpoint's `postgres`
        operation); staged again when the merge finds staged rows missing."""
        attempt = 1
        with timed("postgres"):
            while True:
                counts = stage()
                try:
                    written = merge(counts)
                except StagedRowsMissingError as exc:
                    if attempt == MERGE_ATTEMPTS:
                        raise SinkError(self._gave_up(exc, attempt)) from None
                    log.warning(
                        "PostgreSQL sink %s: %s; was the server restarted (an UNLOGGED table "
                        "is emptied then)? Staging the batch again (attempt %d of %d)",
                        self.table,
                        exc,
                        attempt + 1,
                        MERGE_ATTEMPTS,
                    )
                    attempt += 1
                    continue
                if written:
                    self._vacuum_staging()
                return written

    def _gave_up(self, exc: StagedRowsMissingError, attempts: int) -> str:
        """The run's last line when the staged rows were missing at every attempt."""
        staging = self.table + STAGING_SUFFIX
        return (
            f"PostgreSQL sink {self.table}: {exc}, at each of {attempts} attempts to stage "
            f"the batch; gave up, nothing of it merged. Something empties {staging} between "
            "staging and merge (the server restarting, a TRUNCATE or DELETE by another "
            f"session, a trigger or rule on {staging}): stop it, then start the app again; "
            "the batch is replayed from the checkpoint"
        )

    def _vacuum_staging(self) -> None:
        """Reclaim the staged rows the merge deleted: the staging table stays about one
        batch's size and its scans read no dead rows, whatever autovacuum does (turned
        off, or a minute behind batches of seconds: each scan of a batch would read every
        batch staged since). About 0.05 s for 490,000 rows (bench/costs/driver_cost.py). A
        failure is a warning, once: the merge committed, the next batch tries again."""
        conn = self._conn
        if conn is None or conn.closed:
            return
        try:  # SKIP_LOCKED: not behind an autovacuum or another app's VACUUM of it
            conn.execute(sql.SQL("VACUUM (SKIP_LOCKED) {}").format(self._staging))
        except psycopg.Error as exc:
            if not self._vacuum_warned:
                reason, _, _ = classify(exc, secrets_of(self._params))
                log.warning(
                    "PostgreSQL sink %s: cannot VACUUM its staging table (%s); its deleted "
                    "rows wait for autovacuum",
                    self.table,
                    reason,
                )
                self._vacuum_warned = True

    def _stage_here(
        self, batch_ms: int, rows: list[tuple[str, Any]], window: bool = False
    ) -> dict[int, int]:
        target = self.staging_target(batch_ms, window)

        def stage(conn: Connection) -> dict[int, int]:
            self._clear(conn, target)
            return {0: copy_rows(conn, target, 0, rows)}

        return self._run(f"staging batch_time_ms={batch_ms} in", stage)

    def _clear(self, conn: Connection, target: StagingTarget) -> None:
        """Remove the staged rows an earlier attempt of the target's batch left (a commit
        that need not be durable: the merge checks what is staged)."""
        with conn.transaction():
            conn.execute("SET LOCAL synchronous_commit = off")
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE sink = %s AND batch_ms = %s").format(self._staging),
                [target.sink, target.batch_ms],
            )

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
                self._conn = connect(self._params, self.connect_timeout)
            if not self._schema_ready:
                create_schema(
                    self._conn,
                    self.table,
                    self._totals,
                    self._progress,
                    self.value_type,
                    self._staging,
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

    def _check_staged(
        self, conn: Connection, sink: str, batch_ms: int, counts: Mapping[int, int], found: int
    ) -> None:
        """Every partition's staged rows are there (`found` of them were merged), else
        StagedRowsMissingError naming the partitions short of what their tasks reported."""
        if found == sum(counts.values()):
            return
        rows = conn.execute(
            sql.SQL(
                "SELECT part, count(*) FROM {} WHERE sink = %s AND batch_ms = %s GROUP BY part"
            ).format(self._staging),
            [sink, batch_ms],
        ).fetchall()
        staged = {int(part): int(n) for part, n in rows}
        short = sorted(p for p, n in counts.items() if staged.get(p, 0) != n)
        raise StagedRowsMissingError(sink, batch_ms, found, counts, short)

    def _record(
        self, conn: Connection, sink: str, batch_ms: int, position: str | None, rows: int
    ) -> None:
        """The batch in the progress row, and its staged rows (and any older) removed."""
        conn.execute(
            sql.SQL(
                "UPDATE {} SET batch_ms = %s, source_position = %s::jsonb, rows_written = %s,"
                " updated_at = now() WHERE sink = %s"
            ).format(self._progress),
            [batch_ms, position, rows, sink],
        )
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE sink = %s AND batch_ms <= %s").format(self._staging),
            [sink, batch_ms],
        )

    def _merge(
        self,
        conn: Connection,
        batch_ms: int,
        counts: Mapping[int, int],
        position: str | None,
        plan: Plan,
    ) -> bool:
        replace = plan(self._lock_progress(conn, batch_ms))
        if replace is None:
            return False
        merged = conn.execute(
            sql.SQL(
                "INSERT INTO {} (word, count, last_batch_ms)"
                " SELECT word, count, %s FROM {} WHERE sink = %s AND batch_ms = %s"
                " ON CONFLICT (word) DO UPDATE"
                " SET count = EXCLUDED.count, last_batch_ms = EXCLUDED.last_batch_ms"
            ).format(self._totals, self._staging),
            [batch_ms, self.table, batch_ms],
        ).rowcount
        self._check_staged(conn, self.table, batch_ms, counts, merged)
        if replace:
            conn.execute(
                sql.SQL(
                    "DELETE FROM {} t WHERE NOT EXISTS (SELECT 1 FROM {} s"
                    " WHERE s.sink = %s AND s.batch_ms = %s AND s.word = t.word)"
                ).format(self._totals, self._staging),
                [self.table, batch_ms],
            )
        self._record(conn, self.table, batch_ms, position, merged)
        return True


def _query(dsn: str, table: str, query: sql.Composed, params: list[Any]) -> list[tuple[Any, ...]]:
    """The rows of one query on a new connection; any failure is a SinkError."""
    conninfo = parse_dsn(dsn)
    try:
        with connect(conninfo, 10) as conn:
            return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        reason, hint, error = classify(exc, secrets_of(conninfo))
        raise error(
            f"cannot read PostgreSQL sink {table} at {redact_dsn(dsn)}: {reason}; "
            f"{hint or 'is the server up and reachable?'}"
        ) from exc


def read_totals(dsn: str, table: str, window: bool = False) -> dict[str, Any]:
    """Every word's total in the sink's table (or its count in the `_window` table)."""
    totals, _ = identifiers(table, WINDOW_SUFFIX if window else "")
    rows = _query(dsn, table, sql.SQL("SELECT word, count FROM {}").format(totals), [])
    return {str(word): count if isinstance(count, Decimal) else int(count) for word, count in rows}


def read_progress(dsn: str, table: str) -> dict[str, Any] | None:
    """The sink's progress row (batch_ms, source_position, rows_written, updated_at), if any."""
    _, progress = identifiers(table)
    query = sql.SQL(
        "SELECT batch_ms, source_position, rows_written, updated_at FROM {} WHERE sink = %s"
    ).format(progress)
    rows = _query(dsn, table, query, [table])
    if not rows:
        return None
    return dict(
        zip(("batch_ms", "source_position", "rows_written", "updated_at"), rows[0], strict=True)
    )
