"""The cost of one reading of the Kafka lag: bytes from the broker and CPU, 200 partitions.

    python bench/run.py lag [--partitions 200] [--records 200] [--value-bytes 100]
                            [--readings 5] [--rounds 3] [--workdir DIR]

A tansu broker of its own behind a byte-counting loopback proxy (the broker advertises
the proxy, so every connection of the reader goes through it), a topic of `--partitions`
partitions with `--records` records of `--value-bytes` bytes each, and an app stuck at
offset 0 of every partition (its bookkeeping told so, as a start that never completes its
first batch). The lag watch (sources/kafka/lag_watch.py) reads `--readings` times, called
in this thread: per reading, the bytes the broker sent and the CPU seconds of this thread
(`time.thread_time`: kafka-python's consumer does its network I/O in the caller's thread;
the proxy's threads are not counted). Two ways, alternated round after round:

- `today`: the records' timestamps cached by partition and offset, fetches of at most
  lag_watch.FETCH_BYTES a partition;
- `before`: as up to 0.5.1: the first unprocessed record fetched again at every reading,
  with kafka-python's default of 1 MiB a partition (its fetch_max_bytes 1 MiB in all).

The first reading of each also creates the clients (metadata, connections); the readings
after it are what a stuck app pays every 15 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.results import machine, make_workdir, median, write_json
from streaming_app.common.kafka_lag import KafkaLag
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.lag_watch import FETCH_BYTES, LagWatch
from streaming_app.tools.dev_broker import DevBroker, free_port
from streaming_app.tools.produce import ensure_topic

TODAY, BEFORE = "today", "before"
KAFKA_DEFAULT_FETCH = 1 << 20  # kafka-python's max_partition_fetch_bytes


@dataclass
class CountingProxy:
    """Forwards 127.0.0.1:`port` to the broker and counts the bytes the broker sends."""

    target: int
    port: int = field(default_factory=free_port)
    received: int = 0
    _server: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if count:
                    with self._lock:
                        self.received += len(data)
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


class BeforeWatch(LagWatch):
    """The reading as up to 0.5.1: every lagging partition's first record fetched again."""

    def once(self) -> None:
        from streaming_app.sources.kafka.client import Broker

        if self._broker is None:
            self._broker = Broker(self.connection, client_id="streaming-app-lag")
        found = self._broker.offsets(self.topics)
        processed = self.lag.processed_offsets()
        behind = {
            tp: max(processed[tp], found.earliest.get(tp, 0))
            for tp, end in found.latest.items()
            if tp in processed and end > processed[tp]
        }
        self.lag.read(found.latest, self._timestamps(behind))


@contextlib.contextmanager
def proxied_broker(workdir: Path) -> Iterator[tuple[str, CountingProxy]]:
    """A tansu broker advertising a counting proxy in front of it."""
    proxy_port = free_port()
    with (
        (workdir / "tansu.log").open("wb") as log,
        DevBroker(log=log, advertised_port=proxy_port) as broker,
    ):
        proxy = CountingProxy(broker.port, proxy_port)
        proxy.start()
        try:
            yield broker.bootstrap, proxy
        finally:
            proxy.stop()


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    """`records` records of `value_bytes` into each partition."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    value = b"x" * value_bytes
    try:
        for partition in range(partitions):
            for _ in range(records):
                producer.send(topic, value, partition=partition)
        producer.flush(timeout=120)
    finally:
        producer.close()


def readings(
    bootstrap: str, proxy: CountingProxy, topic: str, partitions: int, way: str, count: int
) -> list[dict[str, float]]:
    """`count` readings of a stuck app's lag: each one's bytes from the broker and CPU."""
    lag = KafkaLag()
    lag.started({(topic, p): 0 for p in range(partitions)})
    connection = KafkaConnection(bootstrap)
    watch = (
        LagWatch(connection, [topic], lag, every=3600)
        if way == TODAY
        else BeforeWatch(connection, [topic], lag, every=3600, fetch_bytes=KAFKA_DEFAULT_FETCH)
    )
    found = []
    try:
        for _ in range(count):
            before, cpu = proxy.received, time.thread_time()
            watch.once()
            found.append({"bytes": proxy.received - before, "cpu_s": time.thread_time() - cpu})
    finally:
        watch.stop()
    return found


def lag_read_cost(
    workdir: Path, partitions: int, records: int, value_bytes: int, count: int, rounds: int
) -> dict[str, Any]:
    """Per way, the readings of each round."""
    found: dict[str, Any] = {
        "partitions": partitions, "records": records, "value_bytes": value_bytes,
        "fetch_bytes": FETCH_BYTES, TODAY: [], BEFORE: [],
    }  # fmt: skip
    with proxied_broker(workdir) as (bootstrap, proxy):
        topic = f"lag-read-{uuid.uuid4().hex[:8]}"
        ensure_topic(KafkaConnection(bootstrap), topic, partitions)
        fill(bootstrap, topic, partitions, records, value_bytes)
        for _ in range(rounds):
            for way in (TODAY, BEFORE):
                found[way].append(readings(bootstrap, proxy, topic, partitions, way, count))
    return found


def report(found: dict[str, Any]) -> list[str]:
    """The table of docs/benchmarks.md: medians over the rounds."""
    lines = [
        f"{found['partitions']} partitions, {found['records']} records of "
        f"{found['value_bytes']} bytes each, the app stuck at offset 0 of each",
        "",
        "| way | first reading: bytes, CPU ms | each reading after: bytes, CPU ms |",
        "|---|---|---|",
    ]
    for way in (TODAY, BEFORE):
        rounds = found[way]
        first = [r[0] for r in rounds]
        later = [each for r in rounds for each in r[1:]]
        lines.append(
            f"| {way} | {median([f['bytes'] for f in first]):,.0f} B, "
            f"{1000 * median([f['cpu_s'] for f in first]):.1f} ms | "
            f"{median([f['bytes'] for f in later]):,.0f} B, "
            f"{1000 * median([f['cpu_s'] for f in later]):.1f} ms |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200, help="[200]")
    parser.add_argument("--records", type=int, default=200, help="records a partition [200]")
    parser.add_argument("--value-bytes", type=int, default=100, help="a record's value [100]")
    parser.add_argument("--readings", type=int, default=5, help="readings of each way [5]")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both ways [3]")
    parser.add_argument("--workdir", type=Path, help="keep the broker's log here")
    options = parser.parse_args()
    workdir = make_workdir(options.workdir, "bench-lag-read-")
    found = lag_read_cost(
        workdir, options.partitions, options.records, options.value_bytes, options.readings,
        options.rounds,
    )  # fmt: skip
    found["machine"] = machine()
    write_json(workdir / "lag_read.json", found)
    print("\n".join(report(found)))
    print(json.dumps(found["machine"]))
