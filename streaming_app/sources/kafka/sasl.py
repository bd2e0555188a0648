"""The Kafka client's SASL credentials, checked with the brokers on the driver.

kafka-python takes a broker's SASL_AUTHENTICATION_FAILED during bootstrap for a broker
not ready: it tries again until bootstrap_timeout_ms, then raises KafkaTimeoutError
("Unable to bootstrap"), which the app retries until kafka_give_up_after, exits 1, and
a supervisor restarts for ever. Checked here, before Spark starts and whenever the
driver connects again, a user name or password the broker refuses, or a mechanism it
does not enable, is one line that names the settings (exit 2). The check is one SASL
exchange with the first bootstrap server that answers, as kafka-python makes it
(SaslHandshake v1, then SaslAuthenticate v0 with PLAIN's token or SCRAM's messages,
RFC 5802/7677). SCRAM's server is verified too: its nonce extends the client's, its
iteration count is within Kafka's bounds (a server asking for millions would hold the
driver in PBKDF2), its messages hold what RFC 5802 says they hold, and its final signature
proves it holds the user's credential; a server that fails that is one line too (exit 2).
The check fails closed: a server that answers must finish the exchange. Another error code
from the broker is one line too (exit 2); an exchange broken after the connection (closed,
timed out, a response this check cannot read) is said in a warning and tried again with
backoff, and if no server that answered finished it after CHECK_ATTEMPTS, the start is
refused (PeerUnreachableError, exit 1: a supervisor starts it again later). Only when no
bootstrap server accepts a connection at all is the check left to kafka-python, whose
bootstrap retries and warns, and whose own SCRAM login checks the server's signature too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
import socket
import struct
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from streaming_app.errors import ConfigError, PeerUnreachableError
from streaming_app.sources.kafka.tls import TLS_PROTOCOLS, TlsSettings, client_context


class SaslSettings(TlsSettings, Protocol):
    """What the SASL check reads of a connection (client.py's KafkaConnection has it all;
    named here so that this module does not import the client that imports it)."""

    @property
    def sasl_mechanism(self) -> str | None: ...
    @property
    def sasl_plain_username(self) -> str | None: ...
    @property
    def sasl_plain_password(self) -> str | None: ...


log = logging.getLogger(__name__)

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's bounds of a SCRAM credential's iterations (ScramMechanism min and maxIterations):
# a server asking for more would hold the driver in PBKDF2.
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
_CLIENT_ID = b"streaming-app"
# A server that answers but does not finish the exchange: tried this often, the waits
# between doubling from CHECK_BACKOFF seconds, before the start is refused.
CHECK_ATTEMPTS, CHECK_BACKOFF = 3, 2.0


class _RefusedError(Exception):
    """The broker answered the exchange with an error code."""

    def __init__(self, code: int, mechanisms: list[str] | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.mechanisms = mechanisms or []


class ScramServerError(Exception):
    """The server's side of a SCRAM exchange does not hold: a malformed message, a nonce that
    does not extend the client's, an iteration count out of Kafka's bounds, or a final
    signature that proves the server does not hold the user's credential (another server
    than the broker)."""


class _Exchange:
    """Requests and responses on one connection (request header v1, not flexible)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.correlation_id = 0

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    def request(self, api_key: int, body: bytes, version: int) -> bytes:
        """Send one request; the response's body (after the correlation id)."""
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(_CLIENT_ID))
        payload = header + _CLIENT_ID + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._recv(4))
        answer = self._recv(size)
        if struct.unpack(">i", answer[:4])[0] != self.correlation_id:
            raise ConnectionError("the broker answered another request")
        return answer[4:]

    def handshake(self, mechanism: str) -> None:
        """SaslHandshake v1; _RefusedError with the broker's mechanisms if it fails."""
        name = mechanism.encode("utf-8")
        answer = self.request(SASL_HANDSHAKE, struct.pack(">h", len(name)) + name, 1)
        error, count = struct.unpack(">hi", answer[:6])
        mechanisms, pos = [], 6
        for _ in range(count):
            (size,) = struct.unpack(">h", answer[pos : pos + 2])
            mechanisms.append(answer[pos + 2 : pos + 2 + size].decode("utf-8"))
            pos += 2 + size
        if error:
            raise _RefusedError(error, mechanisms)

    def authenticate(self, token: bytes) -> bytes:
        """One SaslAuthenticate v0 round: the broker's token; _RefusedError on an error."""
        answer = self.request(SASL_AUTHENTICATE, struct.pack(">i", len(token)) + token, 0)
        (error,) = struct.unpack(">h", answer[:2])
        if error:
            raise _RefusedError(error)
        (message_size,) = struct.unpack(">h", answer[2:4])
        pos = 4 + max(0, message_size)
        (size,) = struct.unpack(">i", answer[pos : pos + 4])
        return answer[pos + 4 : pos + 4 + size]


def _saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


# An attribute of a server message (RFC 5802 section 7): one letter, `=`, a value.
_ATTRIBUTE = re.compile(r"([A-Za-z])=(.*)", re.DOTALL)


def _server_message(token: bytes, which: str, required: str) -> dict[str, str]:
    """The attributes of a server's SCRAM message; ScramServerError if it is malformed or
    lacks one of `required` (the message itself is not quoted: a rogue server wrote it)."""
    try:
        parts = [_ATTRIBUTE.fullmatch(part) for part in token.decode("utf-8").split(",")]
    except UnicodeDecodeError:
        raise ScramServerError(f"its {which} message is not UTF-8") from None
    if not all(parts):
        raise ScramServerError(f"its {which} message is malformed")
    attributes = {m.group(1): m.group(2) for m in parts if m}
    missing = [f"{name}=" for name in required if not attributes.get(name)]
    if missing:
        raise ScramServerError(f"its {which} message lacks {', '.join(missing)}")
    return attributes


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise ScramServerError(f"its {what} is not base64") from None


def scram_exchange(
    exchange: _Exchange, mechanism: str, user: str, password: str, nonce: str | None = None
) -> None:
    """SCRAM's client side (RFC 5802): client-first, then the proof of the password, then
    the server's proof that it holds the credential (ScramServerError if not)."""
    name = _HASHES[mechanism]
    client_nonce = nonce or secrets.token_urlsafe(18)
    first_bare = f"n={_saslname(user)},r={client_nonce}"
    server_first_token = exchange.authenticate(f"n,,{first_bare}".encode())
    attributes = _server_message(server_first_token, "first", "rsi")
    server_first = server_first_token.decode("utf-8")
    if not attributes["i"].isascii() or not attributes["i"].isdigit():
        raise ScramServerError("its first message's iteration count is not a number")
    server_nonce, iterations = attributes["r"], int(attributes["i"])
    if not server_nonce.startswith(client_nonce) or len(server_nonce) == len(client_nonce):
        raise ScramServerError("its nonce does not extend the client's")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramServerError(
            f"it asks for {iterations} iterations, outside Kafka's "
            f"{MIN_ITERATIONS}-{MAX_ITERATIONS}"
        )
    salted = hashlib.pbkdf2_hmac(
        name, password.encode("utf-8"), _base64(attributes["s"], "salt"), iterations
    )
    without_proof = f"c=biws,r={server_nonce}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    signature = hmac.new(stored_key, auth_message, name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_final = exchange.authenticate(
        f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    )
    final = _server_message(server_final, "final", "v")
    server_key = hmac.new(salted, b"Server Key", name).digest()
    expected = hmac.new(server_key, auth_message, name).digest()
    if not hmac.compare_digest(_base64(final["v"], "final signature"), expected):
        raise ScramServerError("its final signature does not match the user's credential")


def _login(exchange: _Exchange, connection: SaslSettings) -> None:
    mechanism = (connection.sasl_mechanism or "").upper()
    user, password = connection.sasl_plain_username or "", connection.sasl_plain_password or ""
    exchange.handshake(mechanism)
    if mechanism == "PLAIN":
        exchange.authenticate(b"\0" + user.encode("utf-8") + b"\0" + password.encode("utf-8"))
    elif mechanism in _HASHES:
        scram_exchange(exchange, mechanism, user, password)


def check_sasl_credentials(
    connection: SaslSettings,
    servers: Iterable[tuple[str, int]],
    timeout: float = 5.0,
    attempts: int = CHECK_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Raise ConfigError (exit 2) if the first bootstrap server that answers refuses the
    SASL user and password, or the mechanism, or is not the broker that holds the user's
    SCRAM credential; PeerUnreachableError (exit 1) if servers answer but none finishes
    the exchange in `attempts`. Nothing to check without SASL, or with no server up."""
    protocol = connection.security_protocol.upper()
    if protocol not in SASL_PROTOCOLS or not connection.sasl_mechanism:
        return
    context = client_context(connection) if protocol in TLS_PROTOCOLS else None
    servers = list(servers)
    for attempt in range(1, attempts + 1):
        broken: list[str] = []
        wait = CHECK_BACKOFF * 2 ** (attempt - 1)  # before the next attempt
        for host, port in servers:
            try:
                raw = socket.create_connection((host, port), timeout=timeout)
            except OSError:
                continue  # not up: kafka-python's
            try:
                with raw:
                    sock = context.wrap_socket(raw, server_hostname=host) if context else raw
                    with sock:
                        _login(_Exchange(sock), connection)
                    return
            except _RefusedError as refused:
                raise _refusal(connection, f"{host}:{port}", refused) from None
            except ScramServerError as exc:
                raise ConfigError(
                    f"bootstrap_servers: the server at {host}:{port} is not a Kafka broker "
                    f"that holds user {connection.sasl_plain_username!r}'s SCRAM credential "
                    f"({exc}); check the address, or the broker's credential for the user"
                ) from None
            except (OSError, ValueError, KeyError, IndexError, struct.error) as exc:
                # Closed mid-exchange (a broker restarting looks the same), timed out, or
                # a response this check cannot read: never taken for a login.
                broken.append(f"{host}:{port} ({type(exc).__name__}: {exc})")
                log.warning(
                    "the SASL check with %s:%d did not finish (%s: %s)%s",
                    host, port, type(exc).__name__, exc,
                    f"; trying again in {wait:.0f} s" if attempt < attempts else "",
                )  # fmt: skip
        if not broken:
            return  # no server up: kafka-python's bootstrap retries and warns
        if attempt < attempts:
            sleep(wait)
    raise PeerUnreachableError(
        f"bootstrap_servers: no Kafka broker that answered finished the SASL check "
        f"({attempts} attempts; last: {'; '.join(broken)}); the app does not read from a "
        "server it could not verify: check the address and that the broker is up"
    )


def _refusal(connection: SaslSettings, server: str, refused: _RefusedError) -> ConfigError:
    mechanism = (connection.sasl_mechanism or "").upper()
    if refused.code == UNSUPPORTED_SASL_MECHANISM:
        return ConfigError(
            f"sasl_mechanism: the Kafka broker at {server} does not enable {mechanism} "
            f"(it enables {', '.join(refused.mechanisms) or 'none'})"
        )
    if refused.code == SASL_AUTHENTICATION_FAILED:
        return ConfigError(
            f"sasl_plain_username, sasl_plain_password: the Kafka broker at {server} refused "
            f"user {connection.sasl_plain_username!r} with this password ({mechanism})"
        )
    return ConfigError(
        f"sasl_mechanism: the server at {server} answered the SASL exchange with error "
        f"code {refused.code} ({mechanism}); a Kafka broker that enables it completes "
        "the exchange: check the address and the broker's SASL listener"
    )
