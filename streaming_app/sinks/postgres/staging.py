"""The postgres sink's staging table: each partition's rows COPYed in by its own task.

The driver's one transaction then merges them (writer.py `merge_staged`).

Executor side: `stage_partition` runs once per partition of the rows to write, (key,
value) pairs of an RDD; `stage_batches` is its twin for a DataFrame's partition (the
structured engine's), whose Arrow batches go to PostgreSQL as CSV written by Arrow, with
no Python object per row. In one transaction a task takes the lock of its (sink, batch,
partition), deletes what an earlier attempt of the same task left (a retried or
speculative task, a replayed batch), COPYs its rows and commits; it yields only its count,
so the driver receives one number per partition. The table is UNLOGGED and the commit
asynchronous (`synchronous_commit` off): the rows need not survive a crash of the server,
since the driver checks every partition's count before it merges and stages again when
they fall short. A connection is kept per Python worker and DSN, as Spark's streaming
guide pools them, and checked before it is used again. A failure of PostgreSQL's is the
task's result, not an exception: its kind (worth a retry, or the error to raise) and one
line with no password.

Driver side: the caller says which engine's rows it hands over (`PairRows`, an RDD's;
`FrameRows`, a frame's), and each runs its own staging job; `run_staging` turns a failed
partition into the error the driver's writer raises for its own (retried with backoff,
or a SinkError that ends the run), so an outage reads as the writer's one-line warnings,
not as Spark's task failures.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from streaming_app.errors import SinkError, SinkSetupError
from streaming_app.sinks.postgres.connection import (
    Connection,
    PostgresUnavailableError,
    connect,
)
from streaming_app.sinks.postgres.failures import classify, secrets_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import RDD
    from pyspark.sql import DataFrame

# The application_name of the executors' sessions (unless the DSN sets one): the driver's
# merge and progress row are `streaming-app`'s, what the tasks stage is theirs.
EXECUTOR_NAME = "streaming-app executor"
RETRY = "retry"  # a failure's kind that a retry may mend
_ERRORS: dict[str, type[SinkError]] = {"SinkSetupError": SinkSetupError, "SinkError": SinkError}
# A task's result: (partition, rows staged, None), or (partition, -1, (kind, reason)).
Staged = tuple[int, int, tuple[str, str] | None]
# The same as the rows of a frame (stage_batches' output), for the structured engine.
STAGED_SCHEMA = "part int, count long, kind string, reason string"
COLUMNS = "(sink, batch_ms, part, word, count)"


@dataclass(frozen=True)
class StagingTarget:
    """Where a batch's rows are staged; shipped to the executors with each task (never
    checkpointed: built by the driver every batch from today's DSN)."""

    params: Mapping[str, Any] = field(repr=False)  # the DSN's parameters: may hold a password
    staging: tuple[str, ...]  # the staging table's name, schema-qualified as given
    sink: str  # the table the rows are for (the totals table or its `_window`)
    batch_ms: int  # the batch (or the window's end) the rows are of
    connect_timeout: float = 10


def copy_rows(
    conn: Connection, target: StagingTarget, part: int, rows: Iterable[Any], arrow: bool = False
) -> int:
    """Replace partition `part`'s staged rows of the target's batch by `rows`, in one
    transaction on `conn`; how many it staged. rows: (key, value) pairs, or with `arrow`
    Arrow record batches of two columns, the key and the value as text (stage_batches)."""
    staging = sql.Identifier(*target.staging)
    lock = f"{'.'.join(target.staging)} {target.sink} {target.batch_ms} {part}"
    with conn.transaction():
        conn.execute("SET LOCAL synchronous_commit = off")
        # Two attempts of one task (a speculative one) take turns: the second replaces.
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [lock])
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE sink = %s AND batch_ms = %s AND part = %s").format(
                staging
            ),
            [target.sink, target.batch_ms, part],
        )
        form = sql.SQL(" (FORMAT csv)" if arrow else "")
        copy_sql = sql.SQL("COPY {} " + COLUMNS + " FROM STDIN{}").format(staging, form)
        with conn.cursor().copy(copy_sql) as copy:
            if arrow:
                return _copy_csv(copy, target, part, rows)
            count = 0
            for key, value in rows:
                copy.write_row((target.sink, target.batch_ms, part, key, value))
                count += 1
            return count


def _copy_csv(copy: Any, target: StagingTarget, part: int, batches: Iterable[Any]) -> int:
    """Each (key, value) record batch as CSV, with the target's columns before it; rows."""
    import pyarrow as pa
    from pyarrow import csv

    # Quoted strings: a key may hold commas, quotes and line breaks (PostgreSQL's CSV).
    options = csv.WriteOptions(include_header=False, quoting_style="needed")
    count = 0
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        columns = [
            pa.repeat(target.sink, n),
            pa.repeat(target.batch_ms, n),
            pa.repeat(part, n),
            batch.column(0),
            batch.column(1),
        ]
        whole = pa.RecordBatch.from_arrays(columns, names=["s", "b", "p", "k", "v"])
        out = pa.BufferOutputStream()
        csv.write_csv(whole, out, options)
        copy.write(memoryview(out.getvalue()))
        count += n
    return count


# This Python worker's connections, by DSN parameters (Spark reuses a worker for tasks).
_CONNECTIONS: dict[str, Connection] = {}


def _connection(target: StagingTarget, key: str) -> Connection:
    """This worker's connection for the target's DSN: the kept one if it still answers
    (a server restarted or a link cut since the last batch leaves it dead), else a new one."""
    conn = _CONNECTIONS.pop(key, None)
    if conn is not None and not conn.closed:
        try:
            conn.execute("SELECT 1")
        except psycopg.Error:
            conn.close()
        else:
            _CONNECTIONS[key] = conn
            return conn
    conn = connect(target.params, target.connect_timeout, EXECUTOR_NAME)
    _CONNECTIONS[key] = conn
    return conn


def stage_partition(
    target: StagingTarget, index: int, rows: Iterable[Any], arrow: bool = False
) -> Iterator[Staged]:
    """Executor side: stage one partition's rows (copy_rows); yields (partition, count,
    None), or (partition, -1, (kind, one line)) if PostgreSQL refused or failed: a
    failure is the driver's to retry or report (a task that raised would be logged by
    Spark with its traceback, and retried at once, without backoff)."""
    key = repr(sorted(target.params.items()))
    try:
        count = copy_rows(_connection(target, key), target, index, rows, arrow)
    except psycopg.Error as exc:
        dropped = _CONNECTIONS.pop(key, None)
        if dropped is not None:
            dropped.close()
        reason, hint, error = classify(exc, secrets_of(target.params))
        if hint is None:
            yield index, -1, (RETRY, reason)
        else:
            yield index, -1, (error.__name__, f"{reason}; {hint}")
        return
    yield index, count, None


def stage_batches(target: StagingTarget, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
    """Executor side, mapInArrow: stage one partition of a frame of (partition, key, value
    as text), the partition its task's own (Spark's `spark_partition_id()`); its one result
    as a record batch of STAGED_SCHEMA, none for an empty partition (nothing to stage)."""
    import pyarrow as pa

    first = next((batch for batch in batches if batch.num_rows), None)
    if first is None:
        return
    index = first.column(0)[0].as_py()
    rows = (batch.drop_columns([batch.schema.names[0]]) for batch in chain([first], batches))
    for part, count, failure in stage_partition(target, index, rows, arrow=True):
        kind, reason = failure if failure is not None else (None, None)
        yield pa.RecordBatch.from_pydict(
            {"part": [part], "count": [count], "kind": [kind], "reason": [reason]},
            schema=pa.schema(
                [("part", pa.int32()), ("count", pa.int64()),
                 ("kind", pa.string()), ("reason", pa.string())]
            ),
        )  # fmt: skip


@dataclass(frozen=True)
class PairRows:
    """A DStream batch's rows: an RDD of (key, value) pairs, staged by `stage_partition`."""

    rdd: RDD[Any]

    def stage(self, target: StagingTarget) -> list[Staged]:
        """Driver side: run the staging job; each task's result."""
        return self.rdd.mapPartitionsWithIndex(partial(stage_partition, target)).collect()


@dataclass(frozen=True)
class FrameRows:
    """A structured micro-batch's rows: a frame of (partition, key, value as text)
    (structured/totals.py `text_pairs`), staged by `stage_batches` through mapInArrow."""

    frame: DataFrame

    def stage(self, target: StagingTarget) -> list[Staged]:
        """Driver side: run the staging job; each task's result, as PairRows' are."""
        results = self.frame.mapInArrow(partial(stage_batches, target), STAGED_SCHEMA).collect()
        return [
            (part, count, None if kind is None else (kind, reason))
            for part, count, kind, reason in results
        ]


# The rows a sink hands over: its caller says which engine's they are.
Rows = PairRows | FrameRows


def run_staging(rows: Rows, target: StagingTarget, what: str) -> dict[int, int]:
    """Driver side: stage `rows` by the executors; {partition: rows staged}.

    A task's connection failure raises PostgresUnavailableError (the caller retries), a
    setting or table to fix SinkSetupError or SinkError, prefixed by `what` (the sink and
    server, for the one line); any other failure of the job comes as Spark raised it.
    """
    found = rows.stage(target)
    failed = [failure for _, _, failure in found if failure is not None]
    if any(kind == RETRY for kind, _ in failed):
        reason = next(reason for kind, reason in failed if kind == RETRY)
        raise PostgresUnavailableError(f"staging: {reason}")
    if failed:
        kind, reason = failed[0]
        raise _ERRORS.get(kind, SinkError)(f"{what}: {reason}")
    return {part: count for part, count, _ in found}
