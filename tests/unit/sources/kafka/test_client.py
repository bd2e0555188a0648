"""The Kafka client's reachability probe."""

from __future__ import annotations

import pytest

from streaming_app.sources.kafka.client import KafkaConnection


def test_check_reachable_probes_the_bootstrap_servers_before_a_client_is_built() -> None:
    import socket

    from streaming_app.sources.kafka.client import _host_port, check_reachable

    assert _host_port("broker:9093") == ("broker", 9093)
    assert _host_port(" broker ") == ("broker", 9092)
    assert _host_port("[::1]:9094") == ("::1", 9094)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            dead = closed.getsockname()[1]
        check_reachable(KafkaConnection(f"127.0.0.1:{dead},127.0.0.1:{port}"))
    with pytest.raises(OSError, match=f"no bootstrap server accepts connections .*:{dead}"):
        check_reachable(KafkaConnection(f"127.0.0.1:{dead}"), timeout=1)


def test_the_broker_is_named_with_its_bootstrap_servers() -> None:
    assert KafkaConnection("10.0.0.2:9092").peer == "the Kafka broker at 10.0.0.2:9092"
    two = KafkaConnection("kafka-1:9092, kafka-2:9092")
    assert two.peer == "the Kafka brokers at kafka-1:9092,kafka-2:9092"
