"""The Kafka client's TLS files, checked on the driver before Spark starts or a client is made.

kafka-python loads the CA, certificate and key only when it first connects: on an
executor, inside a task, where a wrong key password or a missing file fails the batch
with a stack trace, and an encrypted key without a password makes OpenSSL ask for one
on the terminal. Checked here, each mistake is one line that names the setting (exit 2).
The files are checked where the driver runs; executors must have them at the same paths.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from streaming_app.errors import ConfigError

if TYPE_CHECKING:
    from streaming_app.sources.kafka.client import KafkaConnection

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_ENCRYPTED_MARKERS = (b"ENCRYPTED PRIVATE KEY", b"Proc-Type: 4,ENCRYPTED")


class _NoPasswordError(Exception):
    """The key is encrypted and no ssl_password was given."""


def _no_password() -> str:
    raise _NoPasswordError


def _read(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"{key} {path}: not readable ({exc.strerror or exc})") from None


def _reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or "not PEM")


def check_tls_files(connection: KafkaConnection) -> None:
    """Raise ConfigError (exit 2) unless the CA, certificate and key load as kafka-python
    will load them, the key with ssl_password; nothing to check without TLS."""
    if connection.security_protocol.upper() not in TLS_PROTOCOLS:
        return
    if connection.ssl_cafile:
        _read("ssl_cafile", connection.ssl_cafile)
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(connection.ssl_cafile)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"ssl_cafile {connection.ssl_cafile}: no CA certificate in it ({_reason(exc)})"
            ) from None
    if connection.ssl_keyfile and not connection.ssl_certfile:
        raise ConfigError(
            f"ssl_keyfile {connection.ssl_keyfile}: needs ssl_certfile (the client certificate)"
        )
    if connection.ssl_certfile:
        _check_client_pair(connection.ssl_certfile, connection.ssl_keyfile, connection.ssl_password)


def _check_client_pair(certfile: str, keyfile: str | None, password: str | None) -> None:
    _read("ssl_certfile", certfile)
    try:  # a certificate is in the file (as CA, this context loads only certificates)
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(certfile)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"ssl_certfile {certfile}: no certificate in it ({_reason(exc)})"
        ) from None
    key_key, key_path = ("ssl_keyfile", keyfile) if keyfile else ("ssl_certfile", certfile)
    encrypted = any(marker in _read(key_key, key_path) for marker in _ENCRYPTED_MARKERS)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            certfile, keyfile, password if password is not None else _no_password
        )
    except _NoPasswordError:
        raise ConfigError(
            f"{key_key} {key_path}: the private key is encrypted and ssl_password is not set "
            "(set it in STREAMING_APP_SSL_PASSWORD or the config file)"
        ) from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(
                f"{key_key} {key_path}: the private key does not match the certificate in "
                f"ssl_certfile {certfile}"
            ) from None
        if encrypted:
            raise ConfigError(
                f"ssl_password: does not decrypt the private key in {key_key} {key_path} "
                "(wrong password)"
            ) from None
        raise ConfigError(f"{key_key} {key_path}: no private key in it ({_reason(exc)})") from None
