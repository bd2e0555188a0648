"""The Kafka client's TLS files and the brokers' certificates, checked on the driver.

kafka-python loads the CA, certificate and key only when it first connects: on an
executor, inside a task, where a wrong key password or a missing file fails the batch
with a stack trace, and an encrypted key without a password makes OpenSSL ask for one
on the terminal. A broker whose certificate the CA does not verify, or which does not
name the host, is to kafka-python a broker that never answers: retried until
kafka_give_up_after, then exit 1, and restarted by a supervisor forever. Checked here,
before Spark starts and whenever the driver connects again, each mistake is one line
that names the setting (exit 2). The files are checked where the driver runs; executors
must have them at the same paths.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable
from typing import Protocol

from streaming_app.errors import ConfigError

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
# OpenSSL's verify codes for a certificate that is valid but names another host.
_NAME_MISMATCH = (62, 64)  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
_ENCRYPTED_MARKERS = (b"ENCRYPTED PRIVATE KEY", b"Proc-Type: 4,ENCRYPTED")


class TlsSettings(Protocol):
    """What the TLS checks read of a connection (client.py's KafkaConnection has it all;
    named here so that this module does not import the client that imports it)."""

    @property
    def bootstrap_servers(self) -> str: ...
    @property
    def security_protocol(self) -> str: ...
    @property
    def ssl_cafile(self) -> str | None: ...
    @property
    def ssl_certfile(self) -> str | None: ...
    @property
    def ssl_keyfile(self) -> str | None: ...
    @property
    def ssl_password(self) -> str | None: ...
    @property
    def ssl_check_hostname(self) -> bool: ...


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


def check_tls_files(connection: TlsSettings) -> None:
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


def client_context(connection: TlsSettings) -> ssl.SSLContext:
    """The SSL context kafka-python 3 builds from these settings (kafka/net/transport.py)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = connection.ssl_check_hostname
    if connection.ssl_cafile:
        context.load_verify_locations(connection.ssl_cafile)
    else:
        context.load_default_certs()
    if connection.ssl_certfile:
        context.load_cert_chain(
            connection.ssl_certfile, connection.ssl_keyfile, connection.ssl_password
        )
    return context


def check_broker_certificate(
    connection: TlsSettings, servers: Iterable[tuple[str, int]], timeout: float = 5.0
) -> None:
    """Raise ConfigError (exit 2) if the first bootstrap server that answers TLS shows a
    certificate that ssl_cafile does not verify or that does not name its host.

    Anything else (no server up, a refused client certificate, a broken handshake) is
    left to kafka-python and the app's retries: only a certificate is a setting's fault.
    """
    if connection.security_protocol.upper() not in TLS_PROTOCOLS:
        return
    context = client_context(connection)
    for host, port in servers:
        try:
            with (
                socket.create_connection((host, port), timeout=timeout) as raw,
                context.wrap_socket(raw, server_hostname=host),
            ):
                return
        except ssl.SSLCertVerificationError as exc:
            raise _certificate_error(connection, f"{host}:{port}", host, exc) from None
        except OSError:
            continue


def _certificate_error(
    connection: TlsSettings, server: str, host: str, exc: ssl.SSLCertVerificationError
) -> ConfigError:
    reason = (exc.verify_message or _reason(exc)).rstrip(".")
    if exc.verify_code in _NAME_MISMATCH:
        return ConfigError(
            f"ssl_check_hostname: the certificate of the Kafka broker at {server} does not "
            f"name {host} ({reason}); connect by a name it holds (bootstrap_servers, the "
            "brokers' advertised listeners), or set ssl_check_hostname = false"
        )
    cafile = connection.ssl_cafile or "(unset: the system's CAs)"
    return ConfigError(
        f"ssl_cafile {cafile}: does not verify the certificate of the Kafka broker at "
        f"{server} ({reason})"
    )
