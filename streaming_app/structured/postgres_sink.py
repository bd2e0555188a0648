"""The postgres sink of the structured engine: each micro-batch's changed totals, exactly once.

Driver side, in foreachBatch, through the DStream engine's writer (sinks/postgres/): the
same tables, the same staging, the same connection retries, the DSN from today's config
or environment. The executors stage the micro-batch's changed totals (staging.py, a task
a partition); then one transaction locks the progress row, decides from it
(`plan_micro_batch`), merges the staged rows and records the micro-batch in the progress
row. The progress row's identity is the table, as with DStreams; its source position
names the query (`context`, the query id in the checkpoint's `metadata`, which plays the
DStream context's part) and the micro-batch id (`batch_id`), with the Kafka end offsets
from the offsets log. A micro-batch id the row already covers is a replay: skipped. A
micro-batch whose table does not hold the one before (micro-batch 0, a table another run
wrote, the sink added later, a table dropped) stages every total, read from the state on
the executors, and replaces the table's rows, as the DStream sink does after a gap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming_app.errors import CheckpointError, SinkError
from streaming_app.structured.kafka_offsets import from_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streaming_app.settings.schema import AppConfig
    from streaming_app.sinks.postgres.writer import Plan, Progress

log = logging.getLogger(__name__)

CONTEXT = "context"
BATCH_ID = "batch_id"


def micro_batch_position(context: str, batch_id: int, source: str, offset: Any) -> dict[str, Any]:
    """The progress row's source position after a micro-batch.

    The query id and the micro-batch id; for Kafka also the end offsets Spark logged for
    it (each partition's next offset to read), as the DStream engine records them:
    `[[topic, partition, next_offset], ...]`. A files micro-batch is known by its id alone
    (Spark's file source logs its files under that id in `sources/0/`).
    """
    position: dict[str, Any] = {CONTEXT: context, BATCH_ID: batch_id}
    if source == "kafka":
        ends = from_json(offset)
        position["kafka"] = [
            [topic, partition, ends[(topic, partition)]] for topic, partition in sorted(ends)
        ]
    return position


def recorded_batch(previous: Progress | None, context: str) -> int | None:
    """The micro-batch id a progress row records for this query, None if it is another's."""
    if previous is None or not isinstance(previous[1], dict):
        return None
    found = previous[1].get(BATCH_ID)
    if previous[1].get(CONTEXT) != context or type(found) is not int:
        return None
    return found


def needs_every_total(previous: Progress | None, context: str, batch_id: int) -> bool | None:
    """Whether micro-batch `batch_id` of query `context` writes every total, from the row.

    Already recorded: a replay, skipped (None). The micro-batch right after the recorded
    one: its changes apply (False). Anything else (micro-batch 0, a new table, a table
    another run wrote, a gap: the sink added to a query that ran, a table dropped): every
    total, which replaces the table (True), as the DStream sink does after a gap.
    """
    recorded = recorded_batch(previous, context)
    if recorded is not None and recorded >= batch_id:
        return None
    return recorded is None or recorded != batch_id - 1


def plan_micro_batch(table: str, context: str, batch_id: int, every: bool) -> Plan:
    """The writer's plan: decide again from the progress row, under its lock.

    every: whether the rows are every total (then they replace the table). Changes alone
    for a micro-batch that needs every total (the row moved since it was read: another
    run writes the same table) raise SinkError, the transaction rolled back.
    """

    def plan(previous: Progress | None) -> bool | None:
        needed = needs_every_total(previous, context, batch_id)
        if needed is None:
            return None
        if needed and not every:
            raise SinkError(
                f"postgres sink: table {table} changed while micro-batch {batch_id} of query "
                f"{context} was written; is another run writing it? Give each run its own "
                "postgres_table"
            )
        return every

    return plan


def write_postgres(
    config: AppConfig,
    context: str,
    batch_id: int,
    batch_ms: int,
    changes: DataFrame,
    offset: Any,
    every: Callable[[], DataFrame],
) -> str:
    """Write a micro-batch's changed totals (or every total) and its progress row.

    changes: the micro-batch's changed totals as text pairs (totals.text_pairs), on the
    executors; offset: the micro-batch's end offset in the offsets log (Kafka's JSON), for
    the row; every: every total after the micro-batch as text pairs (EveryTotal.text_pairs),
    read when the table does not hold the micro-batch before.
    """
    from streaming_app.sinks.postgres.staging import FrameRows
    from streaming_app.sinks.postgres.stream import writer_for

    try:
        position = micro_batch_position(context, batch_id, config.source, offset)
    except ValueError as exc:  # an edited offsets log: Spark read it, but we cannot
        raise CheckpointError(f"offsets log entry of micro-batch {batch_id}: {exc}") from None
    writer = writer_for(config.postgres_table, config.job == "keyed-sum")
    whole = needs_every_total(writer.last_progress(), context, batch_id)
    if whole is not None:
        rows = every() if whole else changes
        plan = plan_micro_batch(writer.table, context, batch_id, whole)
        if writer.write_staged(FrameRows(rows), batch_ms, position, plan=plan):
            return "every total" if whole and batch_id else "written"
    log.info(
        "postgres sink: batch_id=%d batch_time_ms=%d was written before the restart; skipped",
        batch_id,
        batch_ms,
    )
    return "already written"
