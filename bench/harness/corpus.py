"""A broker, a corpus on a topic, and the baseline: one kafka-python consumer counting it."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker
from streaming_app.tools.produce import generated_lines, produce

WORDS_PER_LINE = 10


VOCABULARY = 100_000


PARTITIONS = 2


@contextlib.contextmanager
def broker(workdir: Path) -> Iterator[str]:
    """KAFKA_BOOTSTRAP if set, else a throwaway tansu broker on a free loopback port."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    with open(workdir / "tansu.log", "wb") as log, DevBroker(log=log) as running:
        yield running.bootstrap


def load_topic(
    bootstrap: str | KafkaConnection, lines: int, seed: int = 1, vocabulary: int = VOCABULARY
) -> str:
    """A new topic holding `lines` 10-word lines over a Zipf vocabulary (100k words);
    `bootstrap` may be a connection with security settings (bench/costs/security.py's TLS)."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    corpus = generated_lines(WORDS_PER_LINE, vocabulary, seed)
    connection = bootstrap if isinstance(bootstrap, KafkaConnection) else KafkaConnection(bootstrap)
    produce(connection, topic, corpus, lines, 0, PARTITIONS)
    return topic


def distinct_words(lines: int, seed: int = 1, vocabulary: int = VOCABULARY) -> int:
    """How many keys the state ends with: distinct words of the corpus load_topic sends."""
    corpus = generated_lines(WORDS_PER_LINE, vocabulary, seed)
    return len(
        {word for _, line in zip(range(lines), corpus, strict=False) for word in line.split()}
    )


def count_partitions(
    bootstrap: str | KafkaConnection, topic: str, partitions: list[int], lines: int
) -> Counter[str]:
    """The baseline's work: one plain kafka-python consumer reads `lines` lines of the
    partitions from their beginning and counts their words with Counter (`bootstrap`: or
    a connection with security settings)."""
    from kafka import KafkaConsumer, TopicPartition

    connection = bootstrap if isinstance(bootstrap, KafkaConnection) else KafkaConnection(bootstrap)
    consumer = KafkaConsumer(**connection.kafka_kwargs(), enable_auto_commit=False)
    try:
        assigned = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        counts: Counter[str] = Counter()
        read = 0
        while read < lines:
            for records in consumer.poll(timeout_ms=1000, max_records=10_000).values():
                for record in records:
                    counts.update(record.value.decode("utf-8", "replace").split())
                read += len(records)
    finally:
        consumer.close()
    return counts


def baseline_seconds(bootstrap: str | KafkaConnection, topic: str, lines: int) -> float:
    """One plain kafka-python consumer counting with Counter: seconds to read the topic."""
    started = time.perf_counter()
    count_partitions(bootstrap, topic, list(range(PARTITIONS)), lines)
    return time.perf_counter() - started


def _count_into(queue: Any, bootstrap: str, topic: str, partition: int, lines: int) -> None:
    queue.put(count_partitions(bootstrap, topic, [partition], lines))


def two_process_seconds(bootstrap: str, topic: str, lines: int) -> float:
    """The baseline's work split over PARTITIONS processes, a partition each, their
    Counters merged in the parent: what the cores give to plain Python without Spark, a
    ceiling for the app (`lines` must divide evenly: load_topic fills partitions alike)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    started = time.perf_counter()
    workers = [
        context.Process(target=_count_into, args=(queue, bootstrap, topic, p, lines // PARTITIONS))
        for p in range(PARTITIONS)
    ]
    for worker in workers:
        worker.start()
    total: Counter[str] = Counter()
    for _ in workers:
        total.update(queue.get(timeout=600))
    for worker in workers:
        worker.join()
    return time.perf_counter() - started
