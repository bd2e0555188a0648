"""Kafka helpers for the integration tests: topics, producing, reading back, a TCP proxy."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import produce
from tests.integration.harness import windows_of

_topic_numbers = itertools.count(1)


def fresh_topic(prefix: str = "t") -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{next(_topic_numbers)}-{uuid.uuid4().hex[:8]}"


def send(bootstrap: str, topic: str, lines: Iterable[str], partitions: int = 3) -> int:
    """Produce lines round-robin (each partition's last one alone: the tansu quirk)."""
    return produce(KafkaConnection(bootstrap), topic, iter(list(lines)), None, 0, partitions)


def send_raw(bootstrap: str, topic: str, values: list[bytes | None], partition: int = 0) -> None:
    """Produce raw values (None = a null value) to one partition, then one alone at the end."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for value in values:
            producer.send(topic, value, key=b"k", partition=partition)  # a null value needs a key
        producer.flush()
        producer.send(topic, b"tail", partition=partition).get(timeout=30)
    finally:
        producer.close()


def read_all(bootstrap: str, topic: str) -> list[bytes | None]:
    """Every value of the topic, read independently of the app (the ground truth)."""
    return list(read_by_offset(bootstrap, topic).values())


def read_by_offset(bootstrap: str, topic: str) -> dict[tuple[int, int], bytes | None]:
    """Every value of the topic by (partition, offset), read independently of the app."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        values: dict[tuple[int, int], bytes | None] = {}
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for tp, records in consumer.poll(timeout_ms=1000).items():
                for r in records:
                    if r.offset < ends[tp]:
                        values[(tp.partition, r.offset)] = r.value
        return values
    finally:
        consumer.close()


def kafka_windows(
    checkpoint: Path,
    by_offset: dict[tuple[int, int], bytes | None],
    ends: list[int],
    window_ms: int,
) -> dict[int, dict[str, int]]:
    """Each window ending at a batch time in `ends`, from the topic and the offset log.

    The offset log says which offsets each batch read (the batch times); the words come
    from the topic as read independently.
    """
    batches = {
        batch_ms: [
            (by_offset[(partition, offset)] or b"").decode()
            for _, partition, start, end in entry["ranges"]
            for offset in range(start, end)
        ]
        for batch_ms, entry in log_entries(checkpoint, "offsets").items()
    }
    return windows_of(batches, ends, window_ms)


def _client_kwargs(bootstrap: str | KafkaConnection) -> dict[str, object]:
    """kafka-python's arguments for a broker address, or a connection with its security."""
    if isinstance(bootstrap, KafkaConnection):
        return bootstrap.kafka_kwargs()
    return {"bootstrap_servers": bootstrap}


def committed_offsets(
    bootstrap: str | KafkaConnection, group: str, topic: str
) -> dict[int, int | None]:
    """The group's committed offset per partition."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**_client_kwargs(bootstrap), group_id=group, enable_auto_commit=False)
    try:
        partitions = sorted(consumer.partitions_for_topic(topic))
        return {p: consumer.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        consumer.close()


def end_offsets(bootstrap: str | KafkaConnection, topic: str) -> dict[int, int]:
    """Each partition's end offset."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**_client_kwargs(bootstrap))
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        return {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def log_entries(checkpoint: Path, kind: str) -> dict[int, dict]:
    """The offset log (kind="offsets") or commit log (kind="commits") as {batch_ms: entry}."""
    directory = checkpoint / kind
    if not directory.is_dir():
        return {}
    return {
        int(name): json.loads((directory / name).read_text())
        for name in os.listdir(directory)
        if name.isdigit()
    }


def assert_log_contiguous(checkpoint: Path) -> None:
    """Each partition's ranges in the offset log follow on without gap or overlap."""
    position: dict[tuple[str, int], int] = {}
    for batch_ms, entry in sorted(log_entries(checkpoint, "offsets").items()):
        for topic, partition, start, end in entry["ranges"]:
            key = (topic, partition)
            assert start <= end, f"batch {batch_ms}: range {start}-{end} of {key} is backwards"
            if key in position:
                assert start == position[key], (
                    f"batch {batch_ms}: {key} starts at {start}, previous batch ended at "
                    f"{position[key]}"
                )
            position[key] = end


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until either side ends, then end both."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class TcpProxy:
    """A loopback TCP proxy that can be taken down and brought up: a broker outage."""

    def __init__(self, target_port: int, port: int) -> None:
        self.target_port = target_port
        self.port = port
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def up(self) -> None:
        """Accept connections and forward them to the target."""
        server = socket.create_server(("127.0.0.1", self.port))
        server.settimeout(0.1)  # closing a socket does not wake a blocked accept()
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and cut the open ones."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, server: socket.socket) -> None:
        while self._server is server:
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            if self._server is not server:
                client.close()
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()
