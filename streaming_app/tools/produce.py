"""`streaming-app produce`: send a text file's lines or generated words to a topic at a rate."""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from streaming_app.common.retry import describe_error
from streaming_app.errors import StreamingAppError
from streaming_app.sources.kafka.client import KafkaConnection

log = logging.getLogger(__name__)

PROGRESS_SECONDS = 5.0


class ProduceError(StreamingAppError):
    """The producer could not reach the broker or the topic."""


def generated_lines(words_per_line: int, vocabulary: int, seed: int | None = None) -> Iterator[str]:
    """Endless lines of Zipf-distributed words `w0`..`w<vocabulary-1>` (w0 most frequent)."""
    rng = random.Random(seed)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(vocabulary)))
    names = [f"w{rank}" for rank in range(vocabulary)]
    while True:
        yield " ".join(rng.choices(names, cum_weights=weights, k=words_per_line))


def file_lines(path: str, repeat: bool) -> Iterator[str]:
    """The non-empty lines of a UTF-8 text file, once or over and over."""
    while True:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.rstrip("\n") for line in handle if line.strip()]
        if not lines:
            return
        yield from lines
        if not repeat:
            return


def ensure_topic(connection: KafkaConnection, topic: str, partitions: int) -> int:
    """Create the topic if it is missing; returns its number of partitions."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(**connection.kafka_kwargs(), client_id="streaming-app-produce")
    try:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
            log.info("created topic %s with %d partitions", topic, partitions)
        except TopicAlreadyExistsError:
            pass
        described = admin.describe_topics([topic])
        return len(described[0]["partitions"]) or partitions
    finally:
        admin.close()


def produce(
    connection: KafkaConnection,
    topic: str,
    lines: Iterator[str],
    count: int | None,
    rate: float,
    partitions: int,
    progress: Callable[[int, float], None] | None = None,
) -> int:
    """Send up to `count` lines (all if None) at `rate` lines/s (0: as fast as possible).

    Lines go round-robin over the partitions, and each partition's last line is sent
    alone and waited for, so that every broker (tansu too) reports it in "latest".
    Ctrl-C ends the sending early, and what was read so far is still sent.
    Returns how many lines the broker acknowledged.
    """
    from kafka import KafkaProducer

    try:
        partitions = ensure_topic(connection, topic, partitions)
        producer = KafkaProducer(
            **connection.kafka_kwargs(), client_id="streaming-app-produce", acks="all", linger_ms=5
        )
    except Exception as exc:
        raise ProduceError(
            f"cannot produce to {topic} at {connection.bootstrap_servers}: {describe_error(exc)}"
        ) from None
    sent = 0
    started = last_report = time.monotonic()
    pending: list[Any] = []
    source = itertools.islice(lines, count) if count is not None else lines
    # Hold back one line per partition so the last ones can be sent alone at the end.
    held: dict[int, bytes] = {}
    try:
        try:
            for index, line in enumerate(source):
                partition = index % partitions
                previous = held.get(partition)
                held[partition] = line.encode("utf-8")
                if previous is not None:
                    pending.append(producer.send(topic, previous, partition=partition))
                if rate > 0:
                    delay = started + (index + 1) / rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                if len(pending) >= 1000:
                    sent += _settle(producer, pending)
                now = time.monotonic()
                if progress and now - last_report >= PROGRESS_SECONDS:
                    last_report = now
                    progress(sent + len(pending), now - started)
        except KeyboardInterrupt:
            log.warning("interrupted: sending what was read so far, then stopping")
        sent += _settle(producer, pending)
        for partition, value in sorted(held.items()):
            producer.send(topic, value, partition=partition).get(timeout=30)
            sent += 1
    except Exception as exc:
        raise ProduceError(
            f"producing to {topic} failed after {sent} acknowledged lines: {describe_error(exc)}"
        ) from None
    finally:
        producer.close(timeout=10)
    return sent


def _settle(producer: Any, pending: list[Any]) -> int:
    producer.flush(timeout=60)
    for future in pending:
        future.get(timeout=0)  # raises the send's error, if any
    done = len(pending)
    pending.clear()
    return done
