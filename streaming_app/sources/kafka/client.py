"""kafka-python clients: broker offsets for the driver's planner, and retries with backoff."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from streaming_app.sources.kafka.offsets import BrokerOffsets, TopicPartition
from streaming_app.sources.kafka.sasl import check_sasl_credentials
from streaming_app.sources.kafka.tls import check_broker_certificate

log = logging.getLogger(__name__)

T = TypeVar("T")

# Requests fail fast enough that an outage shows in the log within seconds.
REQUEST_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class KafkaConnection:
    """How to reach the brokers: kafka-python's connection and security settings."""

    bootstrap_servers: str
    security_protocol: str = "plaintext"
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    ssl_check_hostname: bool = True

    @classmethod
    def from_config(cls, config: Any) -> KafkaConnection:
        """The connection settings of an AppConfig."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})

    def without_secrets(self) -> KafkaConnection:
        """A copy safe to write into the checkpoint: no passwords."""
        return replace(self, sasl_plain_password=None, ssl_password=None)

    @property
    def peer(self) -> str:
        """The brokers as the log names them: `the Kafka broker at host:port`."""
        servers = [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()]
        return f"the Kafka broker{'s' if len(servers) > 1 else ''} at {','.join(servers)}"

    def kafka_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python's clients."""
        kwargs: dict[str, Any] = {
            "bootstrap_servers": [s.strip() for s in self.bootstrap_servers.split(",")],
            "security_protocol": self.security_protocol.upper(),
        }
        optional = {
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_plain_username,
            "sasl_plain_password": self.sasl_plain_password,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_password": self.ssl_password,
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        if self.security_protocol.upper() in ("SSL", "SASL_SSL"):
            kwargs["ssl_check_hostname"] = self.ssl_check_hostname
        return kwargs

    def __repr__(self) -> str:
        masked = {
            f.name: "***"
            if "password" in f.name and getattr(self, f.name)
            else getattr(self, f.name)
            for f in fields(self)
        }
        return "KafkaConnection(" + ", ".join(f"{k}={v!r}" for k, v in masked.items()) + ")"


def _host_port(server: str) -> tuple[str, int]:
    host, sep, port = server.strip().rpartition(":")
    if not sep or host.endswith(":") or (":" in host and not host.startswith("[")):
        return server.strip().strip("[]"), 9092  # no port, or a bare IPv6 address
    return host.strip("[]"), int(port)


def bootstrap_addresses(connection: KafkaConnection) -> list[tuple[str, int]]:
    """(host, port) of each bootstrap server."""
    return [_host_port(s) for s in connection.bootstrap_servers.split(",") if s.strip()]


def check_broker(connection: KafkaConnection) -> None:
    """What the first bootstrap server that answers can refuse of the settings: its
    certificate (TLS) and the SASL credentials, each one line naming them (ConfigError,
    exit 2), not kafka-python's silent retries until kafka_give_up_after. Anything else
    is left to kafka-python and the app's retries."""
    servers = bootstrap_addresses(connection)
    check_broker_certificate(connection, servers)
    check_sasl_credentials(connection, servers)


def check_reachable(connection: KafkaConnection, timeout: float = 5.0) -> None:
    """Raise OSError unless some bootstrap server accepts a TCP connection.

    Checked before a kafka-python client is built: a KafkaConsumer whose bootstrap
    fails leaks its network thread and sockets, which an outage would pile up.
    """
    errors = []
    for server in connection.bootstrap_servers.split(","):
        try:
            socket.create_connection(_host_port(server), timeout=timeout).close()
            return
        except (OSError, ValueError) as exc:
            errors.append(f"{server.strip()}: {getattr(exc, 'strerror', None) or exc}")
    raise OSError(f"no bootstrap server accepts connections ({'; '.join(errors)})")


def new_consumer(**kwargs: Any) -> Any:
    """A KafkaConsumer; if building it fails, its half-started network client is closed.

    kafka-python 3 starts the client's IO thread before it bootstraps, and a failed
    bootstrap (broker down, wrong credentials) would leave thread and sockets behind.
    """
    from kafka import KafkaConsumer

    consumer = KafkaConsumer.__new__(KafkaConsumer)
    try:
        consumer.__init__(**kwargs)
    except BaseException:
        client = getattr(consumer, "_client", None)
        if client is not None:
            try:
                client.close()
            except Exception:
                log.debug("error closing a half-built Kafka client", exc_info=True)
        raise
    return consumer


class Broker:
    """The driver's view of the cluster: partitions, their offsets, and group commits."""

    def __init__(self, connection: KafkaConnection, client_id: str = "streaming-app") -> None:
        self.connection = connection
        self.client_id = client_id
        self._consumer: Any = None
        self._group_consumers: dict[str, Any] = {}

    def _client(self, group_id: str | None = None) -> Any:
        if group_id is None and self._consumer is not None:
            return self._consumer
        if group_id is not None and group_id in self._group_consumers:
            return self._group_consumers[group_id]
        check_reachable(self.connection)
        check_broker(self.connection)
        consumer = new_consumer(
            **self.connection.kafka_kwargs(),
            client_id=self.client_id,
            group_id=group_id,
            enable_auto_commit=False,
            allow_auto_create_topics=False,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            bootstrap_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        if group_id is None:
            self._consumer = consumer
        else:
            self._group_consumers[group_id] = consumer
        return consumer

    def close_group(self, group_id: str) -> None:
        """Close one group's client (after a failed commit) and leave the planner's alone."""
        consumer = self._group_consumers.pop(group_id, None)
        if consumer is not None:
            try:
                consumer.close()
            except Exception:
                log.debug("error closing a Kafka client", exc_info=True)

    def close(self) -> None:
        """Close the clients; the next call connects again."""
        for consumer in [self._consumer, *self._group_consumers.values()]:
            if consumer is not None:
                try:
                    consumer.close()
                except Exception:
                    log.debug("error closing a Kafka client", exc_info=True)
        self._consumer = None
        self._group_consumers = {}

    def partitions(self, topics: Iterable[str]) -> list[TopicPartition]:
        """All partitions of the topics, from fresh metadata (so new partitions show)."""
        consumer = self._client()
        known = consumer.topics()  # a metadata request: partitions added since show up
        result: list[TopicPartition] = []
        for topic in topics:
            if topic in known:
                result.extend((topic, p) for p in sorted(consumer.partitions_for_topic(topic)))
        return result

    def offsets(
        self, topics: Iterable[str], group_id: str | None = None, want_committed: bool = False
    ) -> BrokerOffsets:
        """Earliest and latest offsets of every partition (and committed ones if asked)."""
        from kafka import TopicPartition as KafkaTp

        tps = self.partitions(topics)
        consumer = self._client()
        keyed = [KafkaTp(t, p) for t, p in tps]
        earliest = consumer.beginning_offsets(keyed) if keyed else {}
        latest = consumer.end_offsets(keyed) if keyed else {}
        committed: dict[TopicPartition, int | None] = {}
        if want_committed and group_id:
            group = self._client(group_id)
            committed = {
                (tp.topic, tp.partition): group.committed(tp, timeout_ms=REQUEST_TIMEOUT_MS)
                for tp in keyed
            }
        return BrokerOffsets(
            earliest={(tp.topic, tp.partition): int(o) for tp, o in earliest.items()},
            latest={(tp.topic, tp.partition): int(o) for tp, o in latest.items()},
            committed=committed,
        )

    def commit(self, group_id: str, ends: Mapping[TopicPartition, int]) -> None:
        """Commit end offsets to a consumer group (for lag tools; the offset log rules)."""
        from kafka import TopicPartition as KafkaTp
        from kafka.structs import OffsetAndMetadata

        if not ends:
            return
        group = self._client(group_id)
        group.commit(
            {KafkaTp(t, p): OffsetAndMetadata(o, "streaming-app", -1) for (t, p), o in ends.items()}
        )
