"""The postgres sink of the structured engine: each micro-batch's changed totals, exactly once.

Driver side, in foreachBatch, through the DStream engine's writer (sinks/postgres/): the
same tables, the same connection retries, the DSN from today's config or environment. In
one transaction it locks the progress row, decides from it (`plan_micro_batch`), applies
the totals the micro-batch changed and records the micro-batch in the progress row. The
progress row's identity is the table, as with DStreams; its source position names the
query (`context`, the query id in the checkpoint's `metadata`, which plays the DStream
context's part) and the micro-batch id (`batch_id`), with the Kafka end offsets from the
offsets log. A micro-batch id the row already covers is a replay: skipped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from streaming_app.errors import CheckpointError, SinkError
from streaming_app.structured.kafka_offsets import from_json

if TYPE_CHECKING:
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


def plan_micro_batch(table: str, context: str, batch_id: int) -> Plan:
    """How micro-batch `batch_id` of query `context` goes into the table, from its progress row.

    Already recorded: a replay, skipped (None). The micro-batch right after the recorded
    one: its changes apply (False). Micro-batch 0 of a query the row does not record (a
    new table, a new checkpoint, a table the DStream engine wrote): its changes are all
    the totals, and replace the table (True). Anything else needs every total, which this
    engine does not keep outside its state store: SinkError, the transaction rolled back.
    """

    def plan(previous: Progress | None) -> bool | None:
        recorded = recorded_batch(previous, context)
        if recorded is not None and recorded >= batch_id:
            return None
        if recorded is not None and recorded == batch_id - 1:
            return False
        if batch_id == 0:
            return True
        if recorded is not None:
            holds = f"this query's totals as of micro-batch {recorded} only"
        elif previous is None:
            holds = "no totals of this query"
        else:
            holds = "the totals of another run (another checkpoint, or the DStream engine)"
        raise SinkError(
            f"postgres sink: micro-batch {batch_id} of query {context} needs every total, but "
            f"table {table} holds {holds}; use a new postgres_table, or start over with a new "
            "checkpoint_dir (its first micro-batch replaces the table)"
        )

    return plan


def write_postgres(
    config: AppConfig,
    context: str,
    batch_id: int,
    batch_ms: int,
    changes: list[tuple[str, Any]],
    offset: Any,
) -> str:
    """Write a micro-batch's changed totals and its progress row; what was done, for the log.

    offset: the micro-batch's end offset in the offsets log (Kafka's JSON), for the row.
    """
    from streaming_app.sinks.postgres.stream import writer_for

    try:
        position = micro_batch_position(context, batch_id, config.source, offset)
    except ValueError as exc:  # an edited offsets log: Spark read it, but we cannot
        raise CheckpointError(f"offsets log entry of micro-batch {batch_id}: {exc}") from None
    writer = writer_for(config.postgres_table, config.job == "keyed-sum")
    plan = plan_micro_batch(writer.table, context, batch_id)
    if writer.write_batch(batch_ms, changes, position, plan=plan):
        return "written"
    log.info(
        "postgres sink: batch_id=%d batch_time_ms=%d was written before the restart; skipped",
        batch_id,
        batch_ms,
    )
    return "already written"
