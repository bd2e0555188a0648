"""Executor side of the Kafka source: read one planned offset range with its own consumer."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from streaming_app.common.log_format import ensure_worker_logging
from streaming_app.common.retry import attempts, gave_up
from streaming_app.errors import PeerUnreachableError, SourceDataLostError
from streaming_app.sources.kafka.client import (
    REQUEST_TIMEOUT_MS,
    KafkaConnection,
    check_reachable,
    new_consumer,
)
from streaming_app.sources.kafka.offsets import OffsetRange

log = logging.getLogger(__name__)

# What each read counts: values used, skipped (null or empty, over the size limit),
# decoded with replacement characters, and records lost to retention mid-read.
STAT_KEYS = ("records", "empty", "oversize", "replaced", "lost")
POLL_TIMEOUT_MS = 500
MAX_POLL_RECORDS = 5000
# A read that makes no progress warns every STALL_WARN_SECONDS; one that cannot reach the
# broker retries every CONNECT_RETRY_SECONDS (a short wait: the read goes on soon after a
# heal) and warns at attempts 1, 2, 4, 8, ... (a line every 2 s a partition was noise).
STALL_WARN_SECONDS = 10.0
CONNECT_RETRY_SECONDS = 2.0
# A read gives up (failing its task, so the batch: a restart replays the same logged range)
# once it has been without the broker this much longer than kafka_give_up_after. The
# driver, which asks the broker every batch, then gives up first when it lost the broker
# too, with the run's one line; a task that fails is logged by Spark with stack traces.
EXECUTOR_EXTRA_SECONDS = 60.0


BatchStats = dict[int, dict[str, int]]


def decode_value(value: bytes | None, max_value_bytes: int, stats: dict[str, int]) -> str | None:
    """The text of a message value, or None if it is skipped; counts what happened."""
    if not value:
        stats["empty"] = stats.get("empty", 0) + 1
        return None
    if len(value) > max_value_bytes:
        stats["oversize"] = stats.get("oversize", 0) + 1
        return None
    stats["records"] = stats.get("records", 0) + 1
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        stats["replaced"] = stats.get("replaced", 0) + 1
        return value.decode("utf-8", errors="replace")


def read_range(
    offset_range: OffsetRange,
    connection: KafkaConnection,
    max_value_bytes: int,
    on_out_of_range: str,
    batch_ms: int = 0,
    stats: Any = None,
    give_up_after: float | None = None,
    joined: bool = False,
) -> Iterator[str]:
    """The decoded values of `[from, until)` of one partition (assign + seek, no group).

    `joined`: the values of each poll as one text, joined with newlines (joined_text),
    for a reader that splits lines on newlines anyway (the word count's default pattern).

    Without the broker for `give_up_after` (kafka_give_up_after) plus
    EXECUTOR_EXTRA_SECONDS, raises PeerUnreachableError; None: waits until stopped.
    """
    from kafka import TopicPartition as KafkaTp
    from kafka.errors import OffsetOutOfRangeError

    topic, partition, start, until = offset_range
    if start >= until:
        return
    ensure_worker_logging()  # its warnings below, with time and level like the driver's
    counts: dict[str, int] = {}
    used = 0
    tp = KafkaTp(topic, partition)
    limit = _Limit(connection, offset_range, give_up_after)
    consumer = _connect(connection, max_value_bytes, offset_range, limit)
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        next_offset = start
        last_progress = time.monotonic()
        warned_at = last_progress
        while next_offset < until:
            try:
                # No more than the range still needs: the fetcher decodes the records
                # it returns, and those past `until` would be thrown away.
                wanted = min(MAX_POLL_RECORDS, until - next_offset)
                batch = consumer.poll(timeout_ms=POLL_TIMEOUT_MS, max_records=wanted)
            except OffsetOutOfRangeError:
                next_offset = _after_lost_records(
                    consumer, tp, next_offset, until, on_out_of_range, counts
                )
                continue
            records, next_offset = in_range(batch.get(tp, []), next_offset, until)
            progressed = bool(records)
            if joined and records:
                text, fast = joined_text([value for _, value in records], max_value_bytes, counts)
                used += fast
                if text:
                    yield text
            else:
                for _, value in records:
                    text = None
                    if value and len(value) <= max_value_bytes:
                        try:  # the common case inline, counted once at the end
                            text = value.decode("utf-8")
                            used += 1
                        except UnicodeDecodeError:
                            pass
                    if text is None:  # skipped, or decoded with replacements: counted there
                        text = decode_value(value, max_value_bytes, counts)
                    if text is not None:
                        yield text
            if not progressed and next_offset < until and consumer.position(tp) >= until:
                next_offset = until  # the rest of the range is a gap (compaction, markers)
            now = time.monotonic()
            if progressed:
                last_progress = warned_at = now
            elif limit.reached(now - last_progress):
                detail = f"no records at offset {next_offset} of range {start}-{until}"
                raise limit.error(now - last_progress, detail)
            elif now - warned_at > STALL_WARN_SECONDS:
                warned_at = now
                log.warning(
                    "reading topic=%s partition=%d offset=%d: no records for %.0f s; waiting",
                    topic,
                    partition,
                    next_offset,
                    now - last_progress,
                )
    finally:
        consumer.close()
        if used:
            counts["records"] = counts.get("records", 0) + used
        if stats is not None:
            stats.add({batch_ms: counts})
    log.debug(
        "read topic=%s partition=%d from=%d until=%d counts=%s",
        topic,
        partition,
        start,
        until,
        counts,
    )


def in_range(
    records: list[tuple[int, bytes | None]], next_offset: int, until: int
) -> tuple[list[tuple[int, bytes | None]], int]:
    """The polled `(offset, value)` records in `[next_offset, until)`, and the offset to
    read next: `until` once a record at or past it came (the range is read)."""
    if not records:
        return records, next_offset
    if records[0][0] < next_offset or records[-1][0] >= until:
        past = records[-1][0] >= until
        records = [r for r in records if next_offset <= r[0] < until]
        if past:
            return records, until
    return records, (records[-1][0] + 1 if records else next_offset)


def joined_text(
    values: list[bytes | None], max_value_bytes: int, stats: dict[str, int]
) -> tuple[str, int]:
    """The used values' text, joined with newlines, and how many were used without a
    problem (counted by the caller); the others are counted in `stats` (decode_value).

    Values that are all there, within the limit and valid UTF-8 (the usual case) are
    joined and decoded at once: one call for the poll instead of one a record. Otherwise
    each value goes through decode_value, as the reader does without `joined`.
    """
    if all(values) and max(map(len, values)) <= max_value_bytes:  # type: ignore[arg-type]
        try:
            return b"\n".join(values).decode("utf-8"), len(values)  # type: ignore[arg-type]
        except UnicodeDecodeError:
            pass
    texts = [decode_value(value, max_value_bytes, stats) for value in values]
    return "\n".join(text for text in texts if text is not None), 0


class _Limit:
    """How long one read waits for the broker, and the line it gives up with."""

    def __init__(
        self, connection: KafkaConnection, offset_range: OffsetRange, give_up_after: float | None
    ) -> None:
        self.where = f"reading topic={offset_range.topic} partition={offset_range.partition}"
        self.what = f"{self.where} from {connection.peer}"
        self.give_up_after = give_up_after

    def reached(self, down: float) -> bool:
        """Whether `down` seconds without the broker are past the limit (never without one)."""
        return self.give_up_after is not None and (
            down >= self.give_up_after + EXECUTOR_EXTRA_SECONDS
        )

    def error(self, down: float, detail: str) -> PeerUnreachableError:
        """The one line to give up with."""
        limit = (
            f"kafka_give_up_after = {self.give_up_after:g} s, "
            f"and {EXECUTOR_EXTRA_SECONDS:g} s more in a read"
        )
        return gave_up(self.what, down, detail, limit)


def _connect(
    connection: KafkaConnection, max_value_bytes: int, offset_range: OffsetRange, limit: _Limit
) -> Any:
    """A consumer for one read; retries while the broker is unreachable, up to the limit."""
    from kafka.errors import KafkaError

    from streaming_app.sources.kafka.records import make_lean

    # Python workers have no logging set up: kafka-python would print every failed
    # connection attempt; our own warnings below say it at attempts 1, 2, 4, 8, ...
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    where = limit.where
    attempt = 0
    down_since = 0.0
    while True:
        started = time.monotonic()
        try:
            check_reachable(connection)
            if attempt:
                log.warning("%s: broker back after %d failed attempts", where, attempt)
            # (offset, value) pairs instead of kafka-python's records: a third of the cost.
            return make_lean(
                new_consumer(
                    **connection.kafka_kwargs(),
                    client_id="streaming-app-reader",
                    group_id=None,
                    enable_auto_commit=False,
                    auto_offset_reset="none",
                    max_partition_fetch_bytes=max(1 << 20, max_value_bytes + 4096),
                    bootstrap_timeout_ms=REQUEST_TIMEOUT_MS,
                )
            )
        except (KafkaError, OSError) as exc:
            attempt += 1
            down_since = started if attempt == 1 else down_since
            down = time.monotonic() - down_since
            if limit.reached(down):
                raise limit.error(down, attempts(attempt, exc)) from None
            if attempt & (attempt - 1) == 0:  # a power of two
                log.warning(
                    "%s: broker unreachable (%s, attempt %d); retrying every %g s",
                    where,
                    type(exc).__name__,
                    attempt,
                    CONNECT_RETRY_SECONDS,
                )
            time.sleep(CONNECT_RETRY_SECONDS)


def _after_lost_records(
    consumer: Any, tp: Any, next_offset: int, until: int, policy: str, counts: dict[str, int]
) -> int:
    """Where to go on after the broker said `next_offset` is gone, by the policy."""
    earliest = int(consumer.beginning_offsets([tp])[tp])
    what = (
        f"records {next_offset}-{until} of {tp.topic}:{tp.partition} are no longer on the "
        f"broker (its earliest offset is {earliest})"
    )
    if earliest <= next_offset:
        raise SourceDataLostError(
            f"{what}: the partition was truncated or recreated below the planned range. "
            "Move the checkpoint directory aside to start afresh"
        )
    if policy == "fail":
        raise SourceDataLostError(
            f"{what}. Set on_offset_out_of_range=earliest to skip them (they are lost)"
        )
    lost = min(earliest, until) - next_offset
    counts["lost"] = counts.get("lost", 0) + lost
    log.warning("%s: skipping %d lost records (on_offset_out_of_range=earliest)", what, lost)
    consumer.seek(tp, min(earliest, until))
    return min(earliest, until)
