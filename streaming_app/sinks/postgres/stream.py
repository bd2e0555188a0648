"""The postgres sink as an output operation: each batch's changed totals in one transaction.

Runs on the driver each batch, which plans and commits: the executors COPY the changed
rows (or every total, after a gap) into the staging table, a task a partition, and the
driver's one transaction merges them with the progress row (batch time, source position)
(writer.py, staging.py); the driver receives a count per partition, never a row. The DSN
is today's (from config or environment), never checkpointed: it may carry a password,
and a restarted driver must be able to point at a moved server. It reaches the
executors inside each batch's staging tasks, as Spark ships any task (encrypted on a
cluster secured as docs/security.md says).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.output_errors import app_errors_in_one_line
from streaming_app.settings.rules import DEFAULT_FILLFACTOR
from streaming_app.sources.positions import batch_position
from streaming_app.state.observe import observe_state

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.settings.schema import AppConfig
    from streaming_app.sinks.postgres.writer import PostgresWriter
    from streaming_app.state.view import StateView

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PostgresTarget:
    """What the postgres output operation captures into the checkpoint: no credentials."""

    table: str
    source: str
    checkpoint_dir: str
    batch_ms: int
    context_id: str  # the checkpoint metadata's app_id: a new one means a new state
    numeric: bool = False  # keyed-sum: exact decimal sums (a default: older checkpoints)


@dataclass(frozen=True)
class WindowTarget:
    """The window table's output operation: `<table>_window`, replaced every slide."""

    table: str
    numeric: bool = False


@dataclass
class _Runtime:
    dsn: str = ""
    stop: threading.Event = field(default_factory=threading.Event)
    give_up_after: float | None = None
    fillfactor: int = DEFAULT_FILLFACTOR
    # One writer (one connection) per table and query writing it: see writer_for.
    writers: dict[tuple[str, str], PostgresWriter] = field(default_factory=dict)


_RUNTIME = _Runtime()
TOTALS = "totals"  # the query (or output operation) writing the totals table
WINDOW = "window"  # the one writing `<table>_window`


def configure_postgres(
    dsn: str | None,
    stop: threading.Event,
    give_up_after: float | None = None,
    fillfactor: int = DEFAULT_FILLFACTOR,
) -> None:
    """Give this driver process today's DSN (empty: libpq's PG* environment), stop signal,
    how long an unreachable server is retried (None: until stopped) and the fillfactor of
    a totals table it creates."""
    _RUNTIME.dsn = dsn or ""
    _RUNTIME.stop = stop
    _RUNTIME.give_up_after = give_up_after
    _RUNTIME.fillfactor = fillfactor
    for writer in _RUNTIME.writers.values():
        writer.close()
    _RUNTIME.writers.clear()


def prepare_postgres(config: AppConfig, stop: threading.Event) -> None:
    """A run's start, either engine, before Spark: this driver's writer settings
    (configure_postgres), then the tables made or checked (check_tables), so that a table
    that does not suit the job ends the run in one line."""
    configure_postgres(
        config.postgres_dsn, stop, config.postgres_give_up_after, config.postgres_fillfactor
    )
    check_tables(config.postgres_table, numeric=config.job == "keyed-sum")


def _new_writer(table: str, numeric: bool) -> PostgresWriter:
    from streaming_app.sinks.postgres.writer import PostgresWriter

    value_type = "numeric" if numeric else "bigint"
    return PostgresWriter(
        _RUNTIME.dsn,
        table,
        _RUNTIME.stop,
        value_type=value_type,
        give_up_after=_RUNTIME.give_up_after,
        fillfactor=_RUNTIME.fillfactor,
    )


def writer_for(table: str, numeric: bool = False, query: str = TOTALS) -> PostgresWriter:
    """This driver's writer for a table and the query writing it (TOTALS or WINDOW): its
    own connection, today's DSN, tables created.

    A writer is not thread-safe, and the structured engine's totals and window queries run
    their micro-batches at once, each in a thread of its own: on one shared connection a
    transaction one opened while the other's was open would be a savepoint inside it,
    committed or rolled back with it.
    """
    key = (table, query)
    writer = _RUNTIME.writers.get(key)
    if writer is None:
        writer = _new_writer(table, numeric)
        writer.ensure_schema()
        _RUNTIME.writers[key] = writer
    return writer


def check_tables(table: str, numeric: bool = False) -> None:
    """At start, before Spark: create the tables, or raise SinkError if they cannot serve.

    A table or database that does not suit the job, a wrong password, a missing database,
    or a server certificate that does not verify against sslrootcert or name the host
    (SinkSetupError: exit 2, which a supervisor does not restart) ends the run before any
    batch, with one line naming what to fix in postgres_dsn. One attempt only: an
    unreachable server is a warning, and the first batch waits for it and checks then.
    """
    from streaming_app.sinks.postgres.writer import PostgresUnavailableError

    writer = _new_writer(table, numeric)
    try:
        writer.ensure_schema(retry=False)
    except PostgresUnavailableError as exc:
        writer.close()
        log.warning(
            "PostgreSQL at %s is unreachable at start (%s); the first batch waits for it "
            "and checks table %s then",
            writer.server,
            exc,
            table,
        )
        return
    except BaseException:
        writer.close()
        raise
    _RUNTIME.writers[table, TOTALS] = writer  # its connection serves the first batch


def write_window_postgres(
    batch_time: datetime, rdd: RDD[tuple[str, Any]], target: WindowTarget
) -> None:
    """Replace the window table by the window ending at this batch (a replay changes nothing)."""
    from streaming_app.common.batch_time import epoch_ms
    from streaming_app.sinks.postgres.staging import PairRows

    batch_ms = epoch_ms(batch_time)
    with app_errors_in_one_line(rdd.context):
        writer = writer_for(target.table, target.numeric, WINDOW)
        if not writer.write_window_staged(PairRows(rdd), batch_ms):
            log.info("window at batch_time_ms=%d: already in postgres; skipped", batch_ms)


def _flag_changed(pair: tuple[str, tuple[int, int | None]]) -> tuple[str, tuple[int, bool]]:
    return pair[0], (pair[1][0], pair[1][1] is not None)


def with_changes(
    batch_time: datetime, totals: RDD[tuple[str, int]], counts: RDD[tuple[str, int]]
) -> RDD[tuple[str, tuple[int, bool]]]:
    """Each total with whether this batch changed it (transformWith of totals and counts)."""
    return totals.leftOuterJoin(counts).map(_flag_changed)


def _changed(item: tuple[str, tuple[int, bool]]) -> bool:
    return item[1][1]


def _row(item: tuple[str, tuple[int, bool]]) -> tuple[str, int]:
    return item[0], item[1][0]


def _rows(rdd: RDD[Any], view: StateView | None, whole: bool) -> RDD[tuple[str, Any]]:
    """The rows to write, an RDD that the executors stage: all totals, or those the batch
    changed.

    With a view, `rdd` is the state's and the buckets know their changes; without one,
    it is with_changes' (a join of every total with the batch, for one record per key).
    """
    if view is not None and view.bucketed:
        changed = None if whole else view.changed(rdd)
        return view.totals(rdd) if changed is None else changed
    if whole:
        return rdd.map(_row)
    return rdd.filter(_changed).map(_row)


def write_postgres(
    batch_time: datetime, rdd: RDD[Any], target: PostgresTarget, view: StateView | None = None
) -> None:
    """Write a batch's totals: only those it changed if the table has the previous batch.

    After a gap (first batch, a restart after down time) or when the table was written
    by another context (a restore, a fresh start), the table is replaced by all the
    totals; rows are absolute totals, so that is always right, only larger.
    """
    with app_errors_in_one_line(rdd.context):
        _write_totals(batch_time, rdd, target, view)


def _write_totals(
    batch_time: datetime, rdd: RDD[Any], target: PostgresTarget, view: StateView | None
) -> None:
    from streaming_app.common.batch_time import epoch_ms
    from streaming_app.common.hadoop_fs import HadoopFs
    from streaming_app.sinks.commit import mark_written
    from streaming_app.sinks.postgres.staging import PairRows

    batch_ms = epoch_ms(batch_time)
    writer = writer_for(target.table, target.numeric)
    progress = writer.last_progress()
    if progress is not None and progress[0] >= batch_ms:
        log.info("batch_time_ms=%d: already in postgres table %s; skipped", batch_ms, target.table)
        mark_written(batch_ms, "postgres")
        return
    whole = (
        progress is None
        or progress[0] < batch_ms - target.batch_ms
        or not isinstance(progress[1], dict)
        or progress[1].get("context") != target.context_id
    )
    rows = _rows(rdd, view, whole)
    fs = HadoopFs(rdd.context, target.checkpoint_dir)
    position = {
        "context": target.context_id,
        **batch_position(fs, target.source, target.checkpoint_dir, batch_ms),
    }
    if writer.write_staged(PairRows(rows), batch_ms, position, replace=whole):
        log.debug(
            "postgres batch_time_ms=%d table=%s%s",
            batch_ms,
            target.table,
            " (all totals)" if whole else "",
        )
    mark_written(batch_ms, "postgres")
    if view is not None:  # the state's RDD (without buckets, this is the changes')
        observe_state(batch_time, rdd, view)
