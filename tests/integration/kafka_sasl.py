"""A Kafka endpoint that demands SASL/SCRAM over TLS: tansu behind the tests' SCRAM proxy
behind stunnel.

tansu 0.6 keeps no SCRAM credentials (its memory and S3 storage drop them; the engines
that keep them are not compiled in), so the SASL listener is the test's:
kafka_sasl_proxy.py serves the SASL handshake with the user's SCRAM credentials (salt,
iterations, StoredKey, ServerKey: no password) and then pipes bytes to tansu. stunnel
terminates TLS in front of it with a certificate of the test's CA (no client
certificate: the client proves itself with SCRAM). tansu advertises stunnel's address,
so every connection after bootstrap goes through TLS and SCRAM too. Client -> stunnel
(TLS) -> proxy (SCRAM) -> tansu, each on a loopback port, each stopped by its PID.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker, free_port
from tests.integration.kafka_tls import (
    TlsFiles,
    make_tls_files,
    stop_process,
    stunnel,
    stunnel_service,
    wait_listening,
    without_app_settings,
)
from tests.integration.scram import HASHES, ScramCredential

ROOT = Path(__file__).resolve().parents[2]
MECHANISMS = tuple(sorted(HASHES))  # SCRAM-SHA-256, SCRAM-SHA-512


@dataclass(frozen=True)
class SaslBroker:
    """The SASL_SSL address of a broker that lets in only `user` with the password."""

    bootstrap: str
    files: TlsFiles  # cafile verifies the broker; the client certificate goes unused
    user: str
    proxy_log: Path
    plain_port: int  # tansu's own

    def connection(
        self, password: str, mechanism: str = "SCRAM-SHA-256", **changes: object
    ) -> KafkaConnection:
        """kafka-python settings for this broker, with this password."""
        settings: dict[str, object] = {
            "security_protocol": "sasl_ssl",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": self.user,
            "sasl_plain_password": password,
            "ssl_cafile": str(self.files.cafile),
            **changes,
        }
        return KafkaConnection(self.bootstrap, **settings)  # type: ignore[arg-type]

    def ini(self, path: Path, mechanism: str = "SCRAM-SHA-256", user: str | None = None) -> Path:
        """A config file with the [kafka] SASL_SSL settings, the password left out."""
        path.write_text(
            "[kafka]\n"
            "security_protocol = sasl_ssl\n"
            f"sasl_mechanism = {mechanism}\n"
            f"sasl_plain_username = {user or self.user}\n"
            f"ssl_cafile = {self.files.cafile}\n",
            encoding="utf-8",
        )
        return path

    def proxy_lines(self, prefix: str) -> list[str]:
        """The proxy's log lines that start with `prefix` ("authenticated", "refused")."""
        text = self.proxy_log.read_text("utf-8") if self.proxy_log.exists() else ""
        return [line for line in text.splitlines() if line.startswith(prefix)]


def credentials_for(user: str, password: str, mechanisms: Sequence[str]) -> list[dict[str, object]]:
    """What the proxy is given: the user's SCRAM credential for each mechanism."""
    return [
        {"user": user, **ScramCredential.from_password(m, password).to_json()} for m in mechanisms
    ]


@contextmanager
def scram_proxy(
    port: int, broker_port: int, credentials: list[dict[str, object]], log: Path
) -> Iterator[None]:
    """The SCRAM proxy (its own Python process) on 127.0.0.1:`port` in front of the broker
    on `broker_port`; stopped by its PID at the end."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.kafka_sasl_proxy",
             "--port", str(port), "--broker-port", str(broker_port)],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            cwd=ROOT, env=without_app_settings(),
        )  # fmt: skip
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(credentials).encode("utf-8"))
            proc.stdin.close()
            wait_listening(port, proc, "the SCRAM proxy", timeout=30)
            yield
        finally:
            stop_process(proc)


@contextmanager
def sasl_broker(
    directory: Path, user: str, password: str, mechanisms: Sequence[str] = MECHANISMS
) -> Iterator[SaslBroker]:
    """tansu, the SCRAM proxy and stunnel on loopback ports; all stopped at the end."""
    files = make_tls_files(directory / "tls", secrets.token_hex(8))
    tls_port, proxy_port, plain_port = free_port(), free_port(), free_port()
    service = stunnel_service(
        "kafka-sasl", tls_port, proxy_port, files.server_cert, files.server_key, ca=None
    )
    proxy_log = directory / "sasl-proxy.log"
    with (
        open(directory / "tansu.log", "wb") as broker_log,
        DevBroker(plain_port, log=broker_log, advertised_port=tls_port),
        scram_proxy(proxy_port, plain_port, credentials_for(user, password, mechanisms), proxy_log),
        stunnel(directory, "stunnel-sasl", [service]),
    ):
        yield SaslBroker(f"127.0.0.1:{tls_port}", files, user, proxy_log, plain_port)
