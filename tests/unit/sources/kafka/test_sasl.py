"""The SASL credentials check without a broker: SCRAM's client messages against RFC
7677's example, and a loopback stand-in that refuses (the rest: test_kafka_sasl.py)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from streaming_app.errors import ConfigError
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.sasl import check_sasl_credentials, scram_exchange

# RFC 7677, section 3: user "user", password "pencil".
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)


class _Recorded:
    """An exchange that records the client's tokens and answers from a list."""

    def __init__(self, answers: list[bytes]) -> None:
        self.sent: list[bytes] = []
        self.answers = answers

    def authenticate(self, token: bytes) -> bytes:
        self.sent.append(token)
        return self.answers.pop(0)


def test_scram_messages_are_rfc_7677s_example() -> None:
    exchange = _Recorded([RFC_SERVER_FIRST, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="])
    scram_exchange(exchange, "SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")  # type: ignore[arg-type]
    assert exchange.sent == [b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", RFC_CLIENT_FINAL]


def test_a_user_name_with_a_comma_or_an_equals_sign_is_escaped() -> None:
    exchange = _Recorded([b"r=xy,s=AAAA,i=4096", b"v="])
    scram_exchange(exchange, "SCRAM-SHA-512", "a,b=c", "pw", nonce="x")  # type: ignore[arg-type]
    assert exchange.sent[0] == b"n,,n=a=2Cb=3Dc,r=x"


def _handshake_answer(error: int, mechanisms: list[str]) -> bytes:
    body = struct.pack(">hi", error, len(mechanisms))
    return body + b"".join(struct.pack(">h", len(m)) + m.encode() for m in mechanisms)


def _authenticate_answer(error: int, token: bytes = b"") -> bytes:
    return struct.pack(">hh", error, -1) + struct.pack(">i", len(token)) + token


Answer = Callable[[int], bytes]  # request's api_key -> response body


@pytest.fixture
def broker() -> Iterator[Callable[[Answer], int]]:
    """A loopback stand-in for a broker's SASL listener: one connection, answered by
    `answer`; returns its port."""
    servers: list[socket.socket] = []

    def start(answer: Answer) -> int:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                while size := conn.recv(4):
                    request = conn.recv(struct.unpack(">i", size)[0])
                    api_key, _, correlation_id = struct.unpack(">hhi", request[:8])
                    body = struct.pack(">i", correlation_id) + answer(api_key)
                    conn.sendall(struct.pack(">i", len(body)) + body)

        threading.Thread(target=serve, daemon=True).start()
        return int(server.getsockname()[1])

    yield start
    for server in servers:
        server.close()


def _connection(mechanism: str = "SCRAM-SHA-256") -> KafkaConnection:
    return KafkaConnection(
        "127.0.0.1:9", "sasl_plaintext", mechanism, "counter", "not-the-password"
    )


def test_a_refused_password_names_the_settings(broker: Callable[[Answer], int]) -> None:
    def answer(api_key: int) -> bytes:
        if api_key == 17:
            return _handshake_answer(0, ["PLAIN"])
        return _authenticate_answer(58)

    port = broker(answer)
    with pytest.raises(ConfigError) as caught:
        check_sasl_credentials(_connection("PLAIN"), [("127.0.0.1", port)])
    assert str(caught.value) == (
        "sasl_plain_username, sasl_plain_password: the Kafka broker at "
        f"127.0.0.1:{port} refused user 'counter' with this password (PLAIN)"
    )
    assert "not-the-password" not in str(caught.value)


def test_a_mechanism_the_broker_does_not_enable_names_it(
    broker: Callable[[Answer], int],
) -> None:
    port = broker(lambda api_key: _handshake_answer(33, ["SCRAM-SHA-512"]))
    with pytest.raises(ConfigError) as caught:
        check_sasl_credentials(_connection(), [("127.0.0.1", port)])
    assert str(caught.value) == (
        f"sasl_mechanism: the Kafka broker at 127.0.0.1:{port} does not enable "
        "SCRAM-SHA-256 (it enables SCRAM-SHA-512)"
    )


def test_other_errors_and_unreachable_brokers_are_left_to_kafka_python(
    broker: Callable[[Answer], int],
) -> None:
    port = broker(lambda api_key: _handshake_answer(34, []))  # ILLEGAL_SASL_STATE
    check_sasl_credentials(_connection(), [("127.0.0.1", 9), ("127.0.0.1", port)])


@pytest.mark.parametrize("protocol", ["plaintext", "ssl"])
def test_nothing_is_checked_without_sasl(protocol: str) -> None:
    check_sasl_credentials(KafkaConnection("b:1", protocol), [("192.0.2.1", 1)], timeout=0.01)
