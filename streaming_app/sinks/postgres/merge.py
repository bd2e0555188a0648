"""The postgres sink's merge: a batch's staged rows into its table with its progress row.

Driver side, inside the one transaction the writer opens (writer.py `_commit`): lock the
progress row and decide from it (a replay changes nothing), move the batch's staged rows
into the totals table (upserted; with `replace`, the words not among them deleted) or into
`<table>_window` (replaced whole), check that every partition's staged rows were there
(an UNLOGGED table is emptied by a crash of the server: StagedRowsMissingError, which
rolls the transaction back), record the batch in the progress row and remove its staged
rows. One code path for both tables: `Into` says what differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from streaming_app.sinks.postgres.connection import Connection

# A progress row as read under its lock: the batch time and the source position recorded.
Progress = tuple[int, Any]
# Given the locked progress row (None before the first batch): None if the batch is already
# written (a replay), else whether its rows are all the totals (replace) or the changes.
Plan = Callable[[Progress | None], bool | None]


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


@dataclass(frozen=True)
class Into:
    """The table a merge writes and how: the totals (upserted) or the window (replaced)."""

    table: sql.Identifier
    sink: str  # its name in the staging and progress tables
    time_column: str  # the column that takes the batch time
    whole: bool  # replaced whole by every merge (the window), else upserted (the totals)


def by_time(batch_ms: int, replace: bool) -> Plan:
    """The plan of a batch known by its time: one at or before the recorded one is a replay."""

    def plan(previous: Progress | None) -> bool | None:
        return None if previous is not None and previous[0] >= batch_ms else replace

    return plan


def merge_rows(
    conn: Connection,
    into: Into,
    progress: sql.Identifier,
    staging: sql.Identifier,
    batch_ms: int,
    counts: Mapping[int, int],
    position: str | None,
    plan: Plan,
) -> bool:
    """Merge the batch's staged rows into `into` and record it, inside the caller's
    transaction; False (nothing changed) if `plan` finds it written. counts: each
    partition's staged rows, as its task reported them; position: the source position
    recorded with the batch (JSON text), if any."""
    replace = plan(lock_progress(conn, progress, into.sink, batch_ms))
    if replace is None:
        return False
    if into.whole:
        conn.execute(sql.SQL("DELETE FROM {}").format(into.table))
    conflict = (
        ""
        if into.whole
        else " ON CONFLICT (word) DO UPDATE"
        " SET count = EXCLUDED.count, last_batch_ms = EXCLUDED.last_batch_ms"
    )
    merged = conn.execute(
        sql.SQL(
            "INSERT INTO {} (word, count, {}) SELECT word, count, %s FROM {}"
            " WHERE sink = %s AND batch_ms = %s" + conflict
        ).format(into.table, sql.Identifier(into.time_column), staging),
        [batch_ms, into.sink, batch_ms],
    ).rowcount
    check_staged(conn, staging, into.sink, batch_ms, counts, merged)
    if replace and not into.whole:
        conn.execute(
            sql.SQL(
                "DELETE FROM {} t WHERE NOT EXISTS (SELECT 1 FROM {} s"
                " WHERE s.sink = %s AND s.batch_ms = %s AND s.word = t.word)"
            ).format(into.table, staging),
            [into.sink, batch_ms],
        )
    record(conn, progress, staging, into.sink, batch_ms, position, merged)
    return True


def lock_progress(
    conn: Connection, progress: sql.Identifier, sink: str, batch_ms: int
) -> Progress | None:
    """Lock the sink's progress row (inserting it if absent); what it records, if any."""
    select = sql.SQL("SELECT batch_ms, source_position FROM {} WHERE sink = %s FOR UPDATE")
    insert = sql.SQL(
        "INSERT INTO {} (sink, batch_ms, rows_written) VALUES (%s, %s, 0)"
        " ON CONFLICT (sink) DO NOTHING RETURNING sink"
    )
    while True:  # twice at most: an insert loses only to a row committed meanwhile
        row = conn.execute(select.format(progress), [sink]).fetchone()
        if row is not None:
            return int(row[0]), row[1]
        params = [sink, batch_ms]
        if conn.execute(insert.format(progress), params).fetchone() is not None:
            return None  # our uncommitted row: other writers wait on its key


def check_staged(
    conn: Connection,
    staging: sql.Identifier,
    sink: str,
    batch_ms: int,
    counts: Mapping[int, int],
    found: int,
) -> None:
    """Every partition's staged rows are there (`found` of them were merged), else
    StagedRowsMissingError naming the partitions short of what their tasks reported."""
    if found == sum(counts.values()):
        return
    rows = conn.execute(
        sql.SQL(
            "SELECT part, count(*) FROM {} WHERE sink = %s AND batch_ms = %s GROUP BY part"
        ).format(staging),
        [sink, batch_ms],
    ).fetchall()
    staged = {int(part): int(n) for part, n in rows}
    short = sorted(p for p, n in counts.items() if staged.get(p, 0) != n)
    raise StagedRowsMissingError(sink, batch_ms, found, counts, short)


def record(
    conn: Connection,
    progress: sql.Identifier,
    staging: sql.Identifier,
    sink: str,
    batch_ms: int,
    position: str | None,
    rows: int,
) -> None:
    """The batch in the progress row, and its staged rows (and any older) removed."""
    conn.execute(
        sql.SQL(
            "UPDATE {} SET batch_ms = %s, source_position = %s::jsonb, rows_written = %s,"
            " updated_at = now() WHERE sink = %s"
        ).format(progress),
        [batch_ms, position, rows, sink],
    )
    conn.execute(
        sql.SQL("DELETE FROM {} WHERE sink = %s AND batch_ms <= %s").format(staging),
        [sink, batch_ms],
    )
