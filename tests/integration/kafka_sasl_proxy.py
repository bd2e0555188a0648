"""A Kafka endpoint that demands SASL/SCRAM: a proxy of the tests in front of tansu.

tansu 0.6 keeps no SCRAM credentials, so this proxy does what a broker's SASL listener
does before it lets a client in, and then steps aside:

- ApiVersions (18) is forwarded to the broker and its answer back (tansu's lists
  SaslHandshake 17 v0-1 and SaslAuthenticate 36 v0-2);
- SaslHandshake (17) is answered here: SCRAM-SHA-256 and SCRAM-SHA-512, error 33
  (UNSUPPORTED_SASL_MECHANISM) and the connection closed for any other;
- SaslAuthenticate (36, v0-2) runs SCRAM's server side (scram.py); a failed exchange is
  error 58 (SASL_AUTHENTICATION_FAILED) and the connection closed. After a v0 handshake
  the tokens come raw (size-prefixed, no request header), as in Kafka before KIP-152;
  a failure then just closes the connection;
- any other request before authentication closes the connection, as Kafka does.

After authentication the bytes are piped both ways, unchanged. One thread a connection
(two once piping), so an executor's connections are served at once. Run as
`python -m tests.integration.kafka_sasl_proxy --port P --broker-port B`, the credentials
(scram.ScramCredential as JSON, no password) on stdin; a line a connection on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import socketserver
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Any

from tests.integration.kafka_helpers import pipe
from tests.integration.scram import ScramCredential, ScramError, ScramServer

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
ILLEGAL_SASL_STATE = 34
MAX_FRAME = 100 * 1024 * 1024
_print_lock = threading.Lock()


def say(line: str) -> None:
    """One line on stdout (the proxy's log), whole even when threads write at once."""
    with _print_lock:
        print(line, flush=True)


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    """n bytes, or None if the peer closed first."""
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> bytes | None:
    """A Kafka frame's payload (after its 4-byte big-endian size), or None at the end."""
    size = recv_exactly(sock, 4)
    if size is None:
        return None
    (length,) = struct.unpack(">i", size)
    if not 0 <= length <= MAX_FRAME:
        raise ValueError(f"frame size {length}")
    return recv_exactly(sock, length) if length else b""


def frame(payload: bytes) -> bytes:
    """A payload with its size in front."""
    return struct.pack(">i", len(payload)) + payload


class Reader:
    """Kafka's primitive types, read from the front of a buffer."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated request")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def varint(self) -> int:
        """An unsigned varint (flexible versions' lengths and tag counts)."""
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string(self) -> str | None:
        n = self.unpack(">h")
        return None if n < 0 else self.take(n).decode("utf-8")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.varint()):
            self.varint()  # tag
            self.take(self.varint())


def varint(value: int) -> bytes:
    """An unsigned varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True)
class Header:
    """A request header (v1, or v2 for a flexible version)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_header(reader: Reader, flexible: bool) -> Header:
    """The request header at the reader's position; the body follows."""
    header = Header(reader.unpack(">h"), reader.unpack(">h"), reader.unpack(">i"), None)
    header = Header(header.api_key, header.api_version, header.correlation_id, reader.string())
    if flexible:
        reader.skip_tagged_fields()
    return header


def handshake_response(correlation_id: int, error: int, mechanisms: list[str]) -> bytes:
    """SaslHandshake v0/v1's response (not flexible in any version)."""
    body = struct.pack(">ihi", correlation_id, error, len(mechanisms))
    for name in mechanisms:
        body += struct.pack(">h", len(name)) + name.encode("utf-8")
    return frame(body)


def authenticate_response(
    correlation_id: int, version: int, error: int, message: str | None, auth_bytes: bytes
) -> bytes:
    """SaslAuthenticate v0-2's response (v1 adds the session lifetime, 0: no re-auth; v2
    is flexible: compact strings and bytes, tagged fields)."""
    if version >= 2:
        text = message.encode("utf-8") if message is not None else None
        body = struct.pack(">i", correlation_id) + varint(0) + struct.pack(">h", error)
        body += varint(0) if text is None else varint(len(text) + 1) + text
        body += varint(len(auth_bytes) + 1) + auth_bytes
        return frame(body + struct.pack(">q", 0) + varint(0))
    body = struct.pack(">ih", correlation_id, error)
    if message is None:
        body += struct.pack(">h", -1)
    else:
        body += struct.pack(">h", len(message.encode("utf-8"))) + message.encode("utf-8")
    body += struct.pack(">i", len(auth_bytes)) + auth_bytes
    if version >= 1:
        body += struct.pack(">q", 0)
    return frame(body)


class ClosedError(Exception):
    """The exchange ended without authentication; the connection is closed."""


class SaslSession:
    """One client connection until it has authenticated (or is refused)."""

    def __init__(self, client: socket.socket, broker_port: int, credentials: Any) -> None:
        self.client = client
        self.broker_port = broker_port
        self.credentials: dict[str, dict[str, ScramCredential]] = credentials
        self.broker: socket.socket | None = None
        host, port = client.getpeername()[:2]
        self.peer = f"{host}:{port}"
        self.scram: ScramServer | None = None
        self.handshake_version = -1

    def broker_socket(self) -> socket.socket:
        """The connection to the broker, made on first use."""
        if self.broker is None:
            self.broker = socket.create_connection(("127.0.0.1", self.broker_port))
        return self.broker

    def _refuse(self, why: str) -> ClosedError:
        say(f"refused peer={self.peer}: {why}")
        return ClosedError(why)

    def authenticate(self) -> None:
        """Serve requests until SCRAM succeeds; raise ClosedError otherwise."""
        while self.scram is None or not self.scram.authenticated:
            payload = read_frame(self.client)
            if payload is None:
                raise ClosedError("the client closed the connection")  # a probe, or gave up
            if self.handshake_version == 0 and self.scram is not None:
                self.client.sendall(frame(self._step(payload, raw=True)))
                continue
            reader = Reader(payload)
            api_key, api_version = struct.unpack(">hh", payload[:4])
            flexible = api_key == SASL_AUTHENTICATE and api_version >= 2
            header = parse_header(reader, flexible)
            if api_key == API_VERSIONS:
                broker = self.broker_socket()
                broker.sendall(frame(payload))
                answer = read_frame(broker)
                if answer is None:
                    raise self._refuse("the broker closed the connection")
                self.client.sendall(frame(answer))
            elif api_key == SASL_HANDSHAKE and self.scram is None:
                self._handshake(header, reader)
            elif api_key == SASL_AUTHENTICATE and self.handshake_version >= 1 and self.scram:
                self._authenticate(header, reader, flexible)
            else:
                raise self._refuse(f"api_key {api_key} v{api_version} before authentication")

    def _handshake(self, header: Header, reader: Reader) -> None:
        mechanism = reader.string() or ""
        known = sorted(self.credentials)
        if mechanism not in known:
            self.client.sendall(
                handshake_response(header.correlation_id, UNSUPPORTED_SASL_MECHANISM, known)
            )
            linger(self.client)
            raise self._refuse(f"mechanism {mechanism!r} is not enabled")
        self.client.sendall(handshake_response(header.correlation_id, 0, known))
        self.handshake_version = header.api_version
        self.scram = ScramServer(mechanism, self.credentials[mechanism])

    def _authenticate(self, header: Header, reader: Reader, flexible: bool) -> None:
        size = reader.varint() - 1 if flexible else reader.unpack(">i")
        token = reader.take(size)
        try:
            answer = self._step(token, raw=False)
        except ClosedError as exc:
            assert self.scram is not None
            message = (
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.scram.mechanism}"
            )
            failed = SASL_AUTHENTICATION_FAILED
            version = header.api_version
            self.client.sendall(
                authenticate_response(header.correlation_id, version, failed, message, b"")
            )
            linger(self.client)
            raise exc
        self.client.sendall(
            authenticate_response(header.correlation_id, header.api_version, 0, None, answer)
        )

    def _step(self, token: bytes, raw: bool) -> bytes:
        """The next SCRAM message for the client's token; ClosedError if it fails."""
        assert self.scram is not None
        try:
            if self.scram.user is None:
                return self.scram.first(token)
            answer = self.scram.final(token)
        except (ScramError, ValueError) as exc:  # ValueError: bad UTF-8 or base64
            raise self._refuse(f"{self.scram.mechanism}: {exc}") from None
        framing = "raw tokens after SaslHandshake v0" if raw else "SaslAuthenticate"
        say(
            f"authenticated user={self.scram.user} mechanism={self.scram.mechanism} "
            f"peer={self.peer} ({framing})"
        )
        return answer


def linger(sock: socket.socket, seconds: float = 1.0) -> None:
    """Wait (a while) for the client to close after a refusal: closing first could reach
    it before the refusal does (kafka-python then sees only a lost connection)."""
    sock.settimeout(seconds)
    with contextlib.suppress(OSError):
        while sock.recv(65536):
            pass


class Handler(socketserver.BaseRequestHandler):
    """One client connection: SASL first, then a pipe to the broker."""

    server: ProxyServer

    def handle(self) -> None:
        session = SaslSession(self.request, self.server.broker_port, self.server.credentials)
        try:
            session.authenticate()
            broker = session.broker_socket()
        except (ClosedError, ValueError, OSError) as exc:
            if not isinstance(exc, ClosedError):
                say(f"refused peer={session.peer}: {exc}")
            if session.broker is not None:
                session.broker.close()
            return
        back = threading.Thread(target=pipe, args=(broker, self.request), daemon=True)
        back.start()
        pipe(self.request, broker)
        back.join()
        broker.close()


class ProxyServer(socketserver.ThreadingTCPServer):
    """Accepts on 127.0.0.1; a thread a connection."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, broker_port: int, credentials: Any) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.broker_port = broker_port
        self.credentials = credentials


def load_credentials(data: Any) -> dict[str, dict[str, ScramCredential]]:
    """{mechanism: {user: credential}} from `[{"user": ..., **credential JSON}]`."""
    result: dict[str, dict[str, ScramCredential]] = {}
    for entry in data:
        credential = ScramCredential.from_json(entry)
        result.setdefault(credential.mechanism, {})[entry["user"]] = credential
    return result


def main(argv: list[str] | None = None) -> None:
    """Serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--broker-port", type=int, required=True)
    args = parser.parse_args(argv)
    credentials = load_credentials(json.load(sys.stdin))
    with ProxyServer(args.port, args.broker_port, credentials) as server:
        say(f"listening on 127.0.0.1:{args.port}, broker 127.0.0.1:{args.broker_port}")
        server.serve_forever()


if __name__ == "__main__":
    main()
