"""PostgreSQL sink, driver side: a batch's rows staged, then merged with its progress row.

The rows of a batch reach the database without the driver: the executors COPY them into
the staging table `<table>_staging` (staging.py), a task a partition. The driver then runs
one transaction (`merge_staged`, merge.py): it locks the progress row and decides from it
(a replay changes nothing; after a gap the rows are every total and replace the table),
checks that every partition's staged rows are all there (an UNLOGGED table is emptied by a
crash of the server: then the batch is staged again, three times at most), merges them
into the table, records the batch and its source position in the progress row, and
removes the staged rows. The connection, its retries and a COMMIT in doubt are the
session's (session.py). `write_batch` and `write_window` do the same for rows the driver
holds (the tests' and tools' way in).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import psycopg
from psycopg import sql

from streaming_app.common.prometheus import timed
from streaming_app.errors import SinkError
from streaming_app.settings.rules import STAGING_SUFFIX, WINDOW_SUFFIX, validate_table_name
from streaming_app.sinks.postgres.connection import (
    Connection,
    PostgresUnavailableError,
    name_parts,
    redact_dsn,
    with_environment,
)
from streaming_app.sinks.postgres.failures import classify, secrets_of
from streaming_app.sinks.postgres.merge import (
    Into,
    Plan,
    Progress,
    StagedRowsMissingError,
    by_time,
    merge_rows,
)
from streaming_app.sinks.postgres.read import read_progress, read_totals
from streaming_app.sinks.postgres.schema import SCHEMA_LOCK, create_window_table
from streaming_app.sinks.postgres.session import PostgresSession
from streaming_app.sinks.postgres.staging import Rows, StagingTarget, copy_rows, run_staging

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

# How often a batch is staged before the missing staged rows end the run.
MERGE_ATTEMPTS = 3


class PostgresWriter(PostgresSession):
    """Writes batches of absolute word totals exactly once per batch time, and windows.

    Its connection (session.py) is retried as it says. Not thread-safe: one writer per
    driver thread (stream.py `writer_for`: one per table and query).
    """

    _vacuum_warned = False  # a VACUUM of the staging table failed once

    def staging_target(self, batch_ms: int, window: bool = False) -> StagingTarget:
        """Where the executors stage a batch's rows (or a window's, by its end)."""
        return StagingTarget(
            with_environment(self._params),  # the executors lack the driver's PG* variables
            name_parts(self.table, STAGING_SUFFIX),
            self.table + WINDOW_SUFFIX if window else self.table,
            batch_ms,
            self.connect_timeout,
        )

    def stage(self, rows: Rows, batch_ms: int, window: bool = False) -> dict[int, int]:
        """Stage a batch's (key, value) rows by the executors, each partition's task its own
        rows (an RDD's or a frame's, as the caller says: staging.py); {partition: rows}.
        What an earlier attempt of the batch left is removed first. A task's connection
        failure is retried as the writer's own."""
        target = self.staging_target(batch_ms, window)
        what = f"PostgreSQL sink {self.table} at {self.redacted_dsn}"

        def attempt() -> dict[int, int]:
            self._run("clearing the staged rows in", lambda conn: self._clear(conn, target))
            return run_staging(rows, target, what)

        return self._retried(f"staging batch_time_ms={batch_ms} in", attempt)

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
        into = Into(self._totals, self.table, "last_batch_ms", whole=False)
        decide = plan or by_time(batch_ms, replace)

        def merge(conn: Connection) -> bool:
            return merge_rows(
                conn, into, self._progress, self._staging, batch_ms, counts, position, decide
            )

        written = self._commit(batch_ms, merge)
        rows = sum(counts.values())
        if written:
            log.debug("wrote batch_time_ms=%d rows=%d table=%s", batch_ms, rows, self.table)
        else:
            log.debug("skipped batch_time_ms=%d: already written to %s", batch_ms, self.table)
        return written

    def write_staged(
        self,
        rows: Rows,
        batch_ms: int,
        source_position: Any = None,
        replace: bool = False,
        plan: Plan | None = None,
    ) -> bool:
        """Write a batch's (key, total) rows (an RDD's or a frame's: staging.py `Rows`)
        through the staging table: staged by the executors (`stage`), then merged
        (`merge_staged`); False if already written."""
        return self._staged(
            lambda: self.stage(rows, batch_ms),
            lambda counts: self.merge_staged(batch_ms, counts, source_position, replace, plan),
        )

    def write_window_staged(self, rows: Rows, batch_ms: int) -> bool:
        """Replace `<table>_window` by the window ending at batch_ms, (key, count) rows
        staged by the executors; False if not newer than the recorded one
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
        into = Into(self._window, self.table + WINDOW_SUFFIX, "window_end_ms", whole=True)

        def write(conn: Connection) -> bool:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [SCHEMA_LOCK])
            create_window_table(conn, self._window, self.value_type)
            plan = by_time(batch_ms, True)
            return merge_rows(
                conn, into, self._progress, self._staging, batch_ms, counts, None, plan
            )

        return self._commit(batch_ms, write, "the window at ")

    def write_window(self, batch_ms: int, rows: Iterable[tuple[str, Any]]) -> bool:
        """`write_window_staged` of rows this process holds, staged by it."""
        staged = list(rows)
        return self._staged(
            lambda: self._stage_here(batch_ms, staged, window=True),
            lambda counts: self.merge_window(batch_ms, counts),
        )

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
