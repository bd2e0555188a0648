"""The SASL credentials check without a broker: SCRAM's client messages against RFC
7677's example, and a loopback stand-in that refuses (the rest: test_kafka_sasl.py)."""

from __future__ import annotations

import base64
import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from streaming_app.errors import ConfigError, PeerUnreachableError
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.sasl import (
    ScramServerError,
    check_sasl_credentials,
    scram_exchange,
)

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
    with pytest.raises(ScramServerError):  # this server proves nothing
        scram_exchange(exchange, "SCRAM-SHA-512", "a,b=c", "pw", nonce="x")  # type: ignore[arg-type]
    assert exchange.sent[0] == b"n,,n=a=2Cb=3Dc,r=x"


@pytest.mark.parametrize(
    ("server_first", "server_final", "why", "sent"),
    [
        # RFC 7677's exchange, but a final signature of another credential.
        (RFC_SERVER_FIRST, b"v=" + base64.b64encode(b"\0" * 32), "final signature", 2),
        (RFC_SERVER_FIRST, b"e=other-error", "final message lacks v=", 2),
        # A nonce of the server's own, or the client's alone: no final message is sent.
        (b"r=someone-elses,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", b"", "nonce", 1),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", b"", "nonce", 1),
        # Iterations out of Kafka's bounds: refused before any PBKDF2.
        (RFC_SERVER_FIRST.replace(b"i=4096", b"i=2000000000"), b"", "2000000000 iterations", 1),
        (RFC_SERVER_FIRST.replace(b"i=4096", b"i=1"), b"", "1 iterations", 1),
    ],
)
def test_a_server_that_does_not_prove_the_credential_is_refused(
    server_first: bytes, server_final: bytes, why: str, sent: int
) -> None:
    exchange = _Recorded([server_first, server_final])
    with pytest.raises(ScramServerError, match=why):
        scram_exchange(exchange, "SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")  # type: ignore[arg-type]
    assert len(exchange.sent) == sent


def _handshake_answer(error: int, mechanisms: list[str]) -> bytes:
    body = struct.pack(">hi", error, len(mechanisms))
    return body + b"".join(struct.pack(">h", len(m)) + m.encode() for m in mechanisms)


def _authenticate_answer(error: int, token: bytes = b"") -> bytes:
    return struct.pack(">hh", error, -1) + struct.pack(">i", len(token)) + token


Answer = Callable[[int, bytes], bytes]  # request's api_key, its body -> response body


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
                    api_key, _, correlation_id, id_size = struct.unpack(">hhih", request[:10])
                    body = struct.pack(">i", correlation_id) + answer(
                        api_key, request[10 + id_size :]
                    )
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
    def answer(api_key: int, body: bytes) -> bytes:
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
    port = broker(lambda api_key, body: _handshake_answer(33, ["SCRAM-SHA-512"]))
    with pytest.raises(ConfigError) as caught:
        check_sasl_credentials(_connection(), [("127.0.0.1", port)])
    assert str(caught.value) == (
        f"sasl_mechanism: the Kafka broker at 127.0.0.1:{port} does not enable "
        "SCRAM-SHA-256 (it enables SCRAM-SHA-512)"
    )


def test_another_error_code_is_one_line_and_unreachable_brokers_are_left_to_kafka_python(
    broker: Callable[[Answer], int],
) -> None:
    # Fails closed: a server that answers with an error the check does not know is refused.
    port = broker(lambda api_key, body: _handshake_answer(34, []))  # ILLEGAL_SASL_STATE
    with pytest.raises(ConfigError) as caught:
        check_sasl_credentials(_connection(), [("127.0.0.1", 9), ("127.0.0.1", port)])
    assert str(caught.value) == (
        f"sasl_mechanism: the server at 127.0.0.1:{port} answered the SASL exchange with "
        "error code 34 (SCRAM-SHA-256); a Kafka broker that enables it completes the "
        "exchange: check the address and the broker's SASL listener"
    )
    # No server up at all: kafka-python's bootstrap retries and warns.
    check_sasl_credentials(_connection(), [("127.0.0.1", 9)], sleep=_no_wait)


def _no_wait(seconds: float) -> None:
    raise AssertionError(f"the check waited {seconds} s with no server up")


def _connections_made(protocol: str) -> int:
    """How many connections the check makes to a loopback listener that never answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        address = ("127.0.0.1", int(listener.getsockname()[1]))
        connection = KafkaConnection(f"127.0.0.1:{address[1]}", protocol, "PLAIN", "u", "p")
        # A server that never answers is refused (fails closed); without SASL, no check.
        with contextlib.suppress(PeerUnreachableError):
            check_sasl_credentials(connection, [address], timeout=0.2, attempts=1)
        listener.setblocking(False)
        made = 0
        while True:
            try:
                listener.accept()[0].close()  # connected before the check returned
            except BlockingIOError:
                return made
            made += 1


@pytest.mark.parametrize("protocol", ["plaintext", "ssl"])
def test_nothing_is_checked_without_sasl(protocol: str) -> None:
    # A mechanism, user and password set, but no SASL protocol: no connection at all.
    assert _connections_made(protocol) == 0
    assert _connections_made("sasl_plaintext") == 1  # the probe's positive control


def test_a_server_that_takes_any_password_is_one_line_naming_it(
    broker: Callable[[Answer], int],
) -> None:
    """A server on the broker's address that accepts the proof without the credential
    (what a rogue listener on sasl_plaintext does): its final signature gives it away."""

    def answer(api_key: int, body: bytes) -> bytes:
        if api_key == 17:
            return _handshake_answer(0, ["SCRAM-SHA-256"])
        token = body[4:].decode()
        if token.startswith("n,,"):  # client-first: extend its nonce, as a broker does
            nonce = token.split("r=", 1)[1]
            return _authenticate_answer(0, f"r={nonce}rogue,s=AAAA,i=4096".encode())
        return _authenticate_answer(0, b"v=" + base64.b64encode(b"\0" * 32))

    port = broker(answer)
    with pytest.raises(ConfigError) as caught:
        check_sasl_credentials(_connection(), [("127.0.0.1", port)])
    assert str(caught.value) == (
        f"bootstrap_servers: the server at 127.0.0.1:{port} is not a Kafka broker that holds "
        "user 'counter''s SCRAM credential (its final signature does not match the user's "
        "credential); check the address, or the broker's credential for the user"
    )
    assert "not-the-password" not in str(caught.value)
