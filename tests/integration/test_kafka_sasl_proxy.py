"""The tests' SASL endpoint itself (tansu behind the SCRAM proxy behind stunnel,
kafka_sasl.py), without Spark: kafka-python produces and consumes with either SCRAM
mechanism and is refused with a wrong password; by hand, over TLS, every framing the
proxy serves (SaslHandshake v0 with raw tokens, v1 with SaslAuthenticate v0-v2) lets a
request through to tansu after authentication and none before."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer
from kafka.net.sasl.scram import ScramClient

from streaming_app.sources.kafka.client import new_consumer
from streaming_app.tools.produce import produce
from tests.integration.kafka_helpers import fresh_topic
from tests.integration.kafka_sasl import SaslBroker, sasl_broker
from tests.integration.kafka_sasl_proxy import Reader, frame, read_frame, varint
from tests.integration.kafka_tls import require_tools

pytestmark = pytest.mark.timeout(120)

USER, PASSWORD = "counter", "scram-pw-5d1e94"


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    require_tools("openssl", "stunnel")
    with sasl_broker(tmp_path_factory.mktemp("kafka-sasl"), USER, PASSWORD) as broker:
        yield broker


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_produces_and_consumes(sasl: SaslBroker, mechanism: str) -> None:
    topic = fresh_topic("sasl")
    connection = sasl.connection(PASSWORD, mechanism)
    sent = [f"line {i}" for i in range(30)]
    before = len(sasl.proxy_lines(f"authenticated user={USER} mechanism={mechanism}"))
    produce(connection, topic, iter(sent), None, 0, 3)
    consumer = KafkaConsumer(
        topic, **connection.kafka_kwargs(), auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )  # fmt: skip
    try:
        received = sorted(m.value.decode() for m in consumer)
    finally:
        consumer.close()
    assert received == sorted(sent)
    assert len(sasl.proxy_lines(f"authenticated user={USER} mechanism={mechanism}")) > before


def test_kafka_python_with_a_wrong_password_is_refused(sasl: SaslBroker) -> None:
    from kafka.errors import KafkaTimeoutError

    before = len(sasl.proxy_lines("refused"))
    with pytest.raises(KafkaTimeoutError):  # kafka-python retries it as a broker not ready
        new_consumer(
            **sasl.connection("not-the-password").kafka_kwargs(), bootstrap_timeout_ms=3000
        )
    refused = sasl.proxy_lines("refused")[before:]
    assert refused and all(f"invalid credentials for user '{USER}'" in r for r in refused)


class RawClient:
    """Kafka requests by hand, over TLS to the SASL endpoint."""

    def __init__(self, broker: SaslBroker) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(broker.files.cafile))
        raw = socket.create_connection((host, int(port)), timeout=10)
        self.sock = context.wrap_socket(raw, server_hostname=host)
        self.correlation_id = 0

    def request(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> Reader:
        """Send a request, return a reader positioned at the response body."""
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, 4) + b"test"
        self.sock.sendall(frame(header + (varint(0) if flexible else b"") + body))
        answer = read_frame(self.sock)
        assert answer is not None, f"closed instead of answering api_key {api_key}"
        reader = Reader(answer)
        assert reader.unpack(">i") == self.correlation_id
        if flexible:
            reader.skip_tagged_fields()
        return reader

    def closed(self) -> bool:
        """Whether the server closed the connection (rather than answer)."""
        try:
            return read_frame(self.sock) is None
        except (ConnectionError, ssl.SSLError):
            return True

    def handshake(self, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
        reader = self.request(17, version, struct.pack(">h", len(mechanism)) + mechanism.encode())
        error = reader.unpack(">h")
        return error, [reader.string() or "" for _ in range(reader.unpack(">i"))]

    def authenticate(self, token: bytes, version: int) -> tuple[int, bytes]:
        """One SaslAuthenticate round: (error code, server's token)."""
        flexible = version >= 2
        body = varint(len(token) + 1) + token if flexible else struct.pack(">i", len(token)) + token
        reader = self.request(36, version, body + (varint(0) if flexible else b""), flexible)
        error = reader.unpack(">h")
        if flexible:
            message_size = reader.varint()
            reader.take(max(0, message_size - 1))
            auth = reader.take(reader.varint() - 1)
        else:
            reader.string()
            auth = reader.take(reader.unpack(">i"))
        return error, auth

    def raw_token(self, token: bytes) -> bytes | None:
        """A SASL token after SaslHandshake v0: size-prefixed, no header."""
        self.sock.sendall(frame(token))
        return read_frame(self.sock)

    def api_keys(self) -> set[int]:
        """ApiVersions v0 (answered by tansu): the API keys it lists."""
        reader = self.request(18, 0, b"")
        assert reader.unpack(">h") == 0
        keys = set()
        for _ in range(reader.unpack(">i")):
            keys.add(reader.unpack(">h"))
            reader.take(4)  # min and max version
        return keys

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(sasl: SaslBroker) -> Iterator[RawClient]:
    client = RawClient(sasl)
    yield client
    client.close()


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_authenticate_then_requests_reach_tansu(
    raw: RawClient, mechanism: str, version: int
) -> None:
    assert {17, 36} <= raw.api_keys()  # before authentication: forwarded to tansu
    assert raw.handshake(mechanism) == (0, ["SCRAM-SHA-256", "SCRAM-SHA-512"])
    scram = ScramClient(USER, PASSWORD, mechanism)
    error, server_first = raw.authenticate(scram.first_message(), version)
    assert error == 0
    scram.process_server_first_message(server_first)
    error, server_final = raw.authenticate(scram.final_message(), version)
    assert error == 0
    scram.process_server_final_message(server_final)  # the server's signature checks out
    assert {0, 1, 3} <= raw.api_keys()  # now piped to tansu


def test_handshake_v0_with_raw_tokens(raw: RawClient) -> None:
    assert raw.handshake("SCRAM-SHA-256", version=0)[0] == 0
    scram = ScramClient(USER, PASSWORD, "SCRAM-SHA-256")
    server_first = raw.raw_token(scram.first_message())
    assert server_first is not None
    scram.process_server_first_message(server_first)
    server_final = raw.raw_token(scram.final_message())
    assert server_final is not None
    scram.process_server_final_message(server_final)
    assert {0, 1, 3} <= raw.api_keys()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_wrong_password_is_error_58_and_the_connection_closed(
    raw: RawClient, version: int
) -> None:
    raw.handshake("SCRAM-SHA-256")
    scram = ScramClient(USER, "not-the-password", "SCRAM-SHA-256")
    error, server_first = raw.authenticate(scram.first_message(), version)
    assert error == 0
    scram.process_server_first_message(server_first)
    assert raw.authenticate(scram.final_message(), version)[0] == 58
    assert raw.closed()


def test_an_unknown_user_is_error_58(raw: RawClient) -> None:
    raw.handshake("SCRAM-SHA-512")
    scram = ScramClient("nobody", PASSWORD, "SCRAM-SHA-512")
    assert raw.authenticate(scram.first_message(), 1)[0] == 58
    assert raw.closed()


def test_another_mechanism_is_error_33_and_the_connection_closed(raw: RawClient) -> None:
    assert raw.handshake("PLAIN") == (33, ["SCRAM-SHA-256", "SCRAM-SHA-512"])
    assert raw.closed()


@pytest.mark.parametrize("api_key", [3, 0, 36])  # Metadata, Produce, SaslAuthenticate
def test_a_request_before_the_handshake_closes_the_connection(raw: RawClient, api_key: int) -> None:
    raw.sock.sendall(frame(struct.pack(">hhih", api_key, 1, 7, -1)))
    assert raw.closed()
