"""SCRAM's server side (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka use them),
for the tests' SCRAM proxy (kafka_sasl_proxy.py).

The server keeps what a Kafka broker keeps of a user (`ScramCredential`: salt, iteration
count, StoredKey, ServerKey), never the password: it checks a client's proof against
StoredKey and proves itself with ServerKey. No channel binding (`n,,` or `y,,`), as
Kafka clients send; an authorization id other than the user's own is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's minimum (ScramMechanism.minIterations)


class ScramError(Exception):
    """The client failed to authenticate (or broke the exchange)."""


def _hmac(name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, name).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism, as a broker stores it."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        iterations: int = MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        """Derive the credential (SaltedPassword by PBKDF2, then the two keys); the
        password itself is not kept."""
        name = HASHES[mechanism]
        salt = salt if salt is not None else secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
        client_key = _hmac(name, salted, b"Client Key")
        return cls(
            mechanism=mechanism,
            salt=salt,
            iterations=iterations,
            stored_key=hashlib.new(name, client_key).digest(),
            server_key=_hmac(name, salted, b"Server Key"),
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (bytes in base64)."""
        return {
            "mechanism": self.mechanism,
            "salt": _b64(self.salt),
            "iterations": self.iterations,
            "stored_key": _b64(self.stored_key),
            "server_key": _b64(self.server_key),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScramCredential:
        """Inverse of `to_json`."""
        return cls(
            mechanism=data["mechanism"],
            salt=base64.b64decode(data["salt"]),
            iterations=int(data["iterations"]),
            stored_key=base64.b64decode(data["stored_key"]),
            server_key=base64.b64decode(data["server_key"]),
        )


def _attributes(message: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        pairs.append((name, value))
    return pairs


def decode_user(saslname: str) -> str:
    """RFC 5802's saslname: `=2C` is a comma, `=3D` an equals sign, no other `=`."""
    decoded = saslname.replace("=2C", ",").replace("=3D", "=")
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ScramError(f"malformed user name {saslname!r}")
    return decoded


class ScramServer:
    """One SCRAM exchange, server side: `first` answers client-first with server-first,
    `final` checks client-final's proof and answers with the server's signature."""

    def __init__(
        self, mechanism: str, credentials: dict[str, ScramCredential], nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._credentials = credentials  # user -> credential of this mechanism
        self._server_nonce = nonce if nonce is not None else secrets.token_urlsafe(18)
        self.user: str | None = None
        self._gs2_header = ""
        self._nonce = ""
        self._first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self.authenticated = False

    def first(self, client_first: bytes) -> bytes:
        """server-first-message for client-first-message (`n,,n=user,r=nonce`)."""
        text = client_first.decode("utf-8")
        cbind, authzid, bare = [*text.split(",", 2), "", ""][:3]
        if cbind not in ("n", "y"):
            raise ScramError(f"channel binding {cbind!r} is not supported")
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramError("client-first-message wants n=user,r=nonce")
        user = decode_user(attributes[0][1])
        if authzid and authzid != f"a={attributes[0][1]}":
            raise ScramError(f"authorization id {authzid!r} is not the user's own")
        credential = self._credentials.get(user)
        if credential is None:
            raise ScramError(f"unknown user {user!r}")
        self.user, self._credential = user, credential
        self._gs2_header = f"{cbind},{authzid},"
        self._nonce = attributes[1][1] + self._server_nonce
        self._first_bare = bare
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode("utf-8")

    def final(self, client_final: bytes) -> bytes:
        """server-final-message (`v=signature`) if client-final's proof is right, else
        ScramError."""
        if self._credential is None:
            raise ScramError("client-final-message before client-first-message")
        text = client_final.decode("utf-8")
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final-message has no proof")
        attributes = dict(_attributes(without_proof))
        channel = base64.b64decode(attributes.get("c", ""))
        if channel != self._gs2_header.encode("utf-8"):
            raise ScramError("channel binding differs from client-first-message")
        if attributes.get("r") != self._nonce:
            raise ScramError("nonce differs from server-first-message")
        auth_message = ",".join([self._first_bare, self._server_first, without_proof])
        signature = _hmac(self._hash, self._credential.stored_key, auth_message.encode("utf-8"))
        proof = base64.b64decode(proof_b64)
        if len(proof) != len(signature):
            raise ScramError(f"invalid credentials for user {self.user!r}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), self._credential.stored_key
        ):
            raise ScramError(f"invalid credentials for user {self.user!r}")
        self.authenticated = True
        server_signature = _hmac(
            self._hash, self._credential.server_key, auth_message.encode("utf-8")
        )
        return f"v={_b64(server_signature)}".encode("ascii")
