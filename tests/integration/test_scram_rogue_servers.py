"""Rogue SCRAM servers over a real loopback socket, without Spark: the driver's SASL check
(sources/kafka/sasl.py) refuses each in one line, and passes the right server."""

from __future__ import annotations

import base64
import logging
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from streaming_app.errors import ConfigError, PeerUnreachableError
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.sasl import _Exchange, scram_exchange
from streaming_app.sources.kafka.sasl import check_sasl_credentials as check
from tests.integration.kafka_sasl_proxy import (
    Reader,
    authenticate_response,
    handshake_response,
    parse_header,
    read_frame,
)
from tests.integration.scram import ScramCredential, ScramServer

pytestmark = pytest.mark.timeout(60)

MECHANISM, USER, PASSWORD = "SCRAM-SHA-256", "counter", "s3cret, with=signs"
CREDENTIAL = ScramCredential.from_password(MECHANISM, PASSWORD, 4096)
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36

# What the rogue sends instead of the right server's answer to the client's first (step 0)
# or final (step 1) message; None closes the connection instead of answering.
Rogue = Callable[[int, bytes], bytes | None]


def _serve(conn: socket.socket, rogue: Rogue, server: ScramServer) -> None:
    step = 0
    with conn:
        while (payload := read_frame(conn)) is not None:
            reader = Reader(payload)
            header = parse_header(reader, flexible=False)
            if header.api_key == SASL_HANDSHAKE:
                conn.sendall(handshake_response(header.correlation_id, 0, [MECHANISM]))
                continue
            assert header.api_key == SASL_AUTHENTICATE, header
            token = reader.take(reader.unpack(">i"))
            right = server.first(token) if step == 0 else server.final(token)
            answer = rogue(step, right)
            if answer is None:
                return
            conn.sendall(authenticate_response(header.correlation_id, 0, 0, None, answer))
            step += 1


@pytest.fixture
def rogue_broker() -> Iterator[Callable[..., tuple[int, ScramServer]]]:
    """A listener on 127.0.0.1 that runs SCRAM's server side with the user's credential
    (scram.py), its answers passed through `rogue`; its port and the SCRAM server."""
    listeners: list[socket.socket] = []

    def start(rogue: Rogue, connections: int = 1) -> tuple[int, ScramServer]:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)
        server = ScramServer(MECHANISM, {USER: CREDENTIAL})

        def accept() -> None:
            for _ in range(connections):
                conn, _ = listener.accept()
                _serve(conn, rogue, server)

        threading.Thread(target=accept, daemon=True).start()
        return int(listener.getsockname()[1]), server

    yield start
    for listener in listeners:
        listener.close()


def _connection(port: int) -> KafkaConnection:
    return KafkaConnection(f"127.0.0.1:{port}", "sasl_plaintext", MECHANISM, USER, PASSWORD)


def _first(change: Callable[[bytes], bytes]) -> Rogue:
    return lambda step, right: change(right) if step == 0 else right


def _final(answer: bytes) -> Rogue:
    return lambda step, right: answer if step == 1 else right


def _other_signature(right: bytes) -> bytes:
    """A well-formed signature of another credential (a server without the user's)."""
    return b"v=" + base64.b64encode(bytes(b ^ 1 for b in base64.b64decode(right[2:])))


def _drop(name: bytes) -> Callable[[bytes], bytes]:
    return lambda m: b",".join(p for p in m.split(b",") if not p.startswith(name + b"="))


def _set(name: bytes, value: bytes) -> Callable[[bytes], bytes]:
    def change(message: bytes) -> bytes:
        parts = message.split(b",")
        return b",".join(name + b"=" + value if p.startswith(name + b"=") else p for p in parts)

    return change


def _client_nonce_only(message: bytes) -> bytes:
    """The nonce cut back to the client's own (RFC 7677's client nonces are 24 characters
    long here: secrets.token_urlsafe(18)), which a server must extend."""
    nonce = message.split(b",")[0][2:]
    return _set(b"r", nonce[:24])(message)


ROGUES: dict[str, tuple[Rogue, str]] = {
    "wrong-signature": (_final(b""), ""),  # replaced below: needs the right answer
    "first-without-salt": (_first(_drop(b"s")), "its first message lacks s="),
    "first-without-iterations": (_first(_drop(b"i")), "its first message lacks i="),
    "first-without-nonce": (_first(_drop(b"r")), "its first message lacks r="),
    "first-garbled": (_first(lambda m: m + b",garbage"), "its first message is malformed"),
    "first-not-utf8": (_first(lambda m: b"\xff\xfe" + m), "its first message is not UTF-8"),
    "first-salt-not-base64": (_first(_set(b"s", b"!!!")), "its salt is not base64"),
    "first-iterations-not-a-number": (
        _first(_set(b"i", b"4096x")),
        "its first message's iteration count is not a number",
    ),
    "first-nonce-of-its-own": (
        _first(_set(b"r", b"a-nonce-that-is-not-the-clients")),
        "its nonce does not extend the client's",
    ),
    "first-nonce-not-extended": (
        _first(_client_nonce_only),
        "its nonce does not extend the client's",
    ),
    "final-empty": (_final(b""), "its final message is malformed"),
    "final-error-instead": (_final(b"e=other-error"), "its final message lacks v="),
    "final-garbled": (_final(b"v"), "its final message is malformed"),
    "final-signature-not-base64": (_final(b"v=%%%"), "its final signature is not base64"),
}
ROGUES["wrong-signature"] = (
    lambda step, right: _other_signature(right) if step == 1 else right,
    "its final signature does not match the user's credential",
)


def test_the_right_server_passes_the_check(
    rogue_broker: Callable[..., tuple[int, ScramServer]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The positive control of every case below: the same server, its answers left alone.
    port, server = rogue_broker(lambda step, right: right)
    with caplog.at_level(logging.WARNING):
        check(_connection(port), [("127.0.0.1", port)])
    assert server.authenticated and server.user == USER
    assert "did not finish" not in caplog.text


@pytest.mark.parametrize("case", sorted(ROGUES))
def test_a_rogue_server_is_refused_in_one_line(
    rogue_broker: Callable[..., tuple[int, ScramServer]], case: str
) -> None:
    rogue, why = ROGUES[case]
    port, _ = rogue_broker(rogue)
    with pytest.raises(ConfigError) as caught:
        check(_connection(port), [("127.0.0.1", port)])
    assert str(caught.value) == (
        f"bootstrap_servers: the server at 127.0.0.1:{port} is not a Kafka broker that holds "
        f"user 'counter''s SCRAM credential ({why}); check the address, or the broker's "
        "credential for the user"
    )
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize("step", [0, 1])
def test_a_connection_closed_mid_exchange_is_never_taken_for_a_login(
    rogue_broker: Callable[..., tuple[int, ScramServer]],
    caplog: pytest.LogCaptureFixture,
    step: int,
) -> None:
    """Closed before the server's first or final message, at every attempt: the check
    fails closed. Each attempt is a warning; after the last the start is refused in one
    line (exit 1: a broker restarting looks the same, so a supervisor tries again later)."""
    closing: Rogue = lambda at, right: None if at == step else right  # noqa: E731
    port, _ = rogue_broker(closing)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        exchange = _Exchange(sock)
        exchange.handshake(MECHANISM)
        with pytest.raises(ConnectionError, match="the broker closed the connection"):
            scram_exchange(exchange, MECHANISM, USER, PASSWORD)
    port, _ = rogue_broker(closing, connections=3)
    waits: list[float] = []
    with caplog.at_level(logging.WARNING), pytest.raises(PeerUnreachableError) as caught:
        check(_connection(port), [("127.0.0.1", port)], sleep=waits.append)
    assert waits == [2.0, 4.0]
    assert caplog.text.count(f"the SASL check with 127.0.0.1:{port} did not finish") == 3
    assert str(caught.value) == (
        "bootstrap_servers: no Kafka broker that answered finished the SASL check (3 "
        f"attempts; last: 127.0.0.1:{port} (ConnectionError: the broker closed the "
        "connection)); the app does not read from a server it could not verify: check the "
        "address and that the broker is up"
    )
    assert PASSWORD not in caplog.text + str(caught.value)


def test_a_broker_that_closes_once_then_proves_the_credential_passes(
    rogue_broker: Callable[..., tuple[int, ScramServer]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The positive control of the case above: a broker restarting closes the first
    exchange, then answers the next one right; the check passes after one warning."""
    answers: list[Rogue] = [lambda at, right: None, lambda at, right: right]
    port, server = rogue_broker(lambda at, right: answers[0](at, right), connections=2)

    def next_attempt(seconds: float) -> None:
        answers.pop(0)

    with caplog.at_level(logging.WARNING):
        check(_connection(port), [("127.0.0.1", port)], sleep=next_attempt)
    assert server.authenticated and server.user == USER
    assert caplog.text.count("did not finish") == 1
