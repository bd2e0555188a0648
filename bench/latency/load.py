"""The load of a latency run: Zipf lines at a steady rate, and probe records beside them.

The background load is a process of its own (so that its sends are not paced by the
reader's or the prober's threads): records of LINES_PER_RECORD 10-word lines over the
benchmarks' Zipf vocabulary, sent round-robin over the partitions in ticks of 10 ms at
the rate asked for. A record carries several lines because one kafka-python producer
sends about 55,000 records/s with a whole core here: lines of one record each could not
reach the app's sustained rate beside the app on two cores. The words are those of the
other benchmarks' lines; the app reads fewer, larger records.

A probe is one record of one new word, sent alone (no linger) and waited for, so that it
is the first record of its own record batch: tansu reports a partition's latest offset as
its last batch's first offset + 1, and a probe at the end of a larger batch would wait for
the next one. Its timestamp is the record's CreateTime, given explicitly from this
machine's clock (tansu 0.6 keeps CreateTime: a topic created with
`message.timestamp.type=LogAppendTime` still returns the producer's timestamp, type 0).
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
from typing import Any

from bench.harness.corpus import PARTITIONS, VOCABULARY, WORDS_PER_LINE
from bench.latency.probes import ProbeBook, probe_word
from streaming_app.tools.produce import generated_lines

LINES_PER_RECORD = 10
WORDS_PER_RECORD = LINES_PER_RECORD * WORDS_PER_LINE
TICK_S = 0.01
POOL_RECORDS = 5_000  # distinct records, sent over and over (the Zipf shape is kept)


def record_pool(records: int, seed: int = 1) -> list[bytes]:
    """`records` records, each LINES_PER_RECORD lines of the benchmarks' Zipf words."""
    lines = generated_lines(WORDS_PER_LINE, VOCABULARY, seed)
    return [
        "\n".join(itertools.islice(lines, LINES_PER_RECORD)).encode("utf-8") for _ in range(records)
    ]


def due(elapsed_s: float, records_per_s: float, sent: int) -> int:
    """How many records are due after `elapsed_s` at the rate, `sent` sent so far."""
    return max(0, int(elapsed_s * records_per_s) - sent)


def _steady(bootstrap: str, topic: str, records_per_s: float, stop: Any, counter: Any) -> None:
    """The load process: records at the rate until `stop` is set; `counter`: records sent."""
    from kafka import KafkaProducer

    pool = record_pool(POOL_RECORDS)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=1 << 20,
        client_id="latency-load",
    )  # fmt: skip
    sent, started = 0, time.monotonic()
    try:
        while not stop.is_set():
            for _ in range(due(time.monotonic() - started, records_per_s, sent)):
                producer.send(topic, pool[sent % len(pool)], partition=sent % PARTITIONS)
                sent += 1
            counter.value = sent
            time.sleep(TICK_S)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


class Load:
    """The background load, a forked process, from start() until stop()."""

    def __init__(self, bootstrap: str, topic: str, words_per_s: int) -> None:
        context = multiprocessing.get_context("fork")
        self._stop = context.Event()
        self._counter = context.Value("q", 0)
        self._process = context.Process(
            target=_steady,
            args=(bootstrap, topic, words_per_s / WORDS_PER_RECORD, self._stop, self._counter),
            daemon=True,
        )
        self.started = 0.0

    def start(self) -> None:
        """Start sending."""
        self.started = time.monotonic()
        self._process.start()

    def sent_words(self) -> int:
        """Words sent so far."""
        return int(self._counter.value) * WORDS_PER_RECORD

    def stop(self) -> None:
        """Stop sending; the process ends after flushing what it sent."""
        self._stop.set()
        self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.kill()


class Prober:
    """A thread that sends a probe every `every` seconds, noting each one's timestamp."""

    def __init__(self, bootstrap: str, topic: str, book: ProbeBook, every: float) -> None:
        from kafka import KafkaProducer

        self.book = book
        self.every = every
        self._topic = topic
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=0, client_id="latency-probes"
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        """Start probing."""
        self._thread.start()

    def _run(self) -> None:
        number, started = 0, time.monotonic()
        try:
            while not self._stop.is_set():
                word = probe_word(number)
                timestamp_ms = int(time.time() * 1000)
                self.book.sent_at(word, timestamp_ms)
                self._producer.send(
                    self._topic, word.encode(), partition=number % PARTITIONS,
                    timestamp_ms=timestamp_ms,
                ).get(timeout=30)  # fmt: skip
                number += 1
                self._stop.wait(max(0.0, started + number * self.every - time.monotonic()))
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        """Stop probing; raises what stopped the thread early, if anything did."""
        self._stop.set()
        self._thread.join(timeout=60)
        self._producer.close(timeout=10)
        if self.error is not None:
            raise RuntimeError(f"the prober failed: {self.error!r}") from self.error
