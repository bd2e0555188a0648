"""A Kafka broker that demands TLS with client certificates: tansu behind stunnel.

For development, the Kafka TLS tests (tests/integration/kafka_tls.py) and the security
benchmark (bench/costs/security.py); it needs `openssl` and stunnel (Debian `stunnel4`).

tansu 0.6 speaks no working TLS of its own, so stunnel (Debian `stunnel4`) terminates TLS
in front of it, requires a client certificate signed by the test CA, and forwards to tansu
on a loopback port of its own; tansu advertises stunnel's address, so every connection a
client makes after bootstrap goes through TLS too. The CA, the broker's certificate (SAN
127.0.0.1 and localhost), the client's certificate and its password-protected key are
made with openssl for each session; so are a CA that signed nothing and a certificate of
the CA for another host name, which stunnel shows on a second port. Both processes are
stopped by their PIDs at the end.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker, free_port

STUNNEL_NAMES = ("stunnel4", "stunnel")


@dataclass(frozen=True)
class TlsFiles:
    """What a client needs: the CA that signed the broker's certificate, its own pair."""

    cafile: Path
    certfile: Path
    keyfile: Path  # encrypted with `password`
    password: str
    server_cert: Path
    server_key: Path
    other_cafile: Path  # a CA that signed nothing here
    misnamed_cert: Path  # signed by the CA, for broker.invalid only
    misnamed_key: Path


@dataclass(frozen=True)
class TlsBroker:
    """The TLS address of a broker that refuses clients without a certificate of the CA."""

    bootstrap: str
    files: TlsFiles
    misnamed_bootstrap: str  # the same broker, with a certificate that names another host
    plain_port: int  # tansu's own, for a tunnel started later

    def connection(self, **changes: object) -> KafkaConnection:
        """kafka-python settings for this broker (password included)."""
        settings: dict[str, object] = {
            "security_protocol": "ssl",
            "ssl_cafile": str(self.files.cafile),
            "ssl_certfile": str(self.files.certfile),
            "ssl_keyfile": str(self.files.keyfile),
            "ssl_password": self.files.password,
            **changes,
        }
        return KafkaConnection(self.bootstrap, **settings)  # type: ignore[arg-type]

    def ini(self, path: Path) -> Path:
        """A config file with the [kafka] TLS settings, the key's password left out."""
        path.write_text(
            "[kafka]\n"
            "security_protocol = ssl\n"
            f"ssl_cafile = {self.files.cafile}\n"
            f"ssl_certfile = {self.files.certfile}\n"
            f"ssl_keyfile = {self.files.keyfile}\n",
            encoding="utf-8",
        )
        return path


def stunnel_binary() -> str | None:
    """The stunnel executable, if installed."""
    return next((p for name in STUNNEL_NAMES if (p := shutil.which(name))), None)


def _openssl(*args: str, cwd: Path, stdin: str | None = None) -> None:
    """openssl with `args`; a password goes through `stdin`, never the command line (which
    every user of the machine reads in /proc/*/cmdline)."""
    subprocess.run(
        ["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60, input=stdin,
        text=stdin is not None,
    )  # fmt: skip


def make_tls_files(directory: Path, password: str) -> TlsFiles:
    """A CA, a broker certificate for 127.0.0.1/localhost, a client certificate and key."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    req = ("req", "-newkey", "rsa:2048", "-nodes", "-subj")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=streaming-app test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    _openssl(*req, "/CN=localhost", "-keyout", "server.key", "-out", "server.csr", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.pem",
             cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-subj", "/CN=streaming-app", "-passout", "stdin",
             "-keyout", "client.key", "-out", "client.csr",
             cwd=d, stdin=password + "\n")  # fmt: skip
    _openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", "client.pem", cwd=d)  # fmt: skip
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=another CA", "-keyout", "other-ca.key", "-out", "other-ca.pem",
             cwd=d)  # fmt: skip
    (d / "misnamed.ext").write_text("subjectAltName = DNS:broker.invalid\n")
    _openssl(*req, "/CN=broker.invalid", "-keyout", "misnamed.key", "-out", "misnamed.csr",
             cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", "misnamed.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "misnamed.ext", "-out",
             "misnamed.pem", cwd=d)  # fmt: skip
    for key in ("ca.key", "server.key", "client.key", "other-ca.key", "misnamed.key"):
        (d / key).chmod(0o600)
    return TlsFiles(
        cafile=d / "ca.pem",
        certfile=d / "client.pem",
        keyfile=d / "client.key",
        password=password,
        server_cert=d / "server.pem",
        server_key=d / "server.key",
        other_cafile=d / "other-ca.pem",
        misnamed_cert=d / "misnamed.pem",
        misnamed_key=d / "misnamed.key",
    )


def stunnel_service(
    name: str, port: int, connect_port: int, cert: Path, key: Path, ca: Path | None
) -> list[str]:
    """A stunnel service: TLS on `port` to plain TCP on `connect_port`; with `ca`, a client
    certificate it signed is required."""
    lines = [
        f"[{name}]",
        f"accept = 127.0.0.1:{port}",
        f"connect = 127.0.0.1:{connect_port}",
        f"cert = {cert}",
        f"key = {key}",
    ]
    if ca is not None:
        lines += [
            f"CAfile = {ca}",
            "verifyChain = yes",  # verify = 2 in older stunnel's words
            "requireCert = yes",
        ]
    return lines


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float) -> None:
    """Return once 127.0.0.1:`port` accepts; RuntimeError if `proc` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process the test started (by its PID): SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def without_app_settings() -> dict[str, str]:
    """The environment minus the app's settings (STREAMING_APP_*): a helper process of the
    test gets none of the app's secrets."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STREAMING_APP_")}


@contextmanager
def stunnel(directory: Path, name: str, services: list[list[str]]) -> Iterator[None]:
    """stunnel with these services (`_service`), in the foreground, until the block ends;
    `name`.conf and `name`.log in `directory`."""
    binary = stunnel_binary()
    assert binary is not None, "stunnel is not installed"
    conf = directory / f"{name}.conf"
    head = ["foreground = yes", "pid =", "debug = warning"]  # no pid file: the test holds it
    conf.write_text("\n".join(head + [line for s in services for line in s] + [""]))
    ports = [int(line.rpartition(":")[2]) for s in services for line in s if "accept" in line]
    with open(directory / f"{name}.log", "wb") as log:
        proc = subprocess.Popen(
            [binary, str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=without_app_settings(),
        )
        try:
            for port in ports:
                wait_listening(port, proc, "stunnel", timeout=30)
            yield
        finally:
            stop_process(proc)


@contextmanager
def tls_broker(directory: Path, password: str) -> Iterator[TlsBroker]:
    """tansu on a loopback port behind stunnel on another; both stopped at the end."""
    files = make_tls_files(directory / "tls", password)
    tls_port, misnamed_port, plain_port = free_port(), free_port(), free_port()
    services = [
        stunnel_service("kafka", tls_port, plain_port, files.server_cert, files.server_key,
                 files.cafile),
        stunnel_service("kafka-misnamed", misnamed_port, plain_port, files.misnamed_cert,
                 files.misnamed_key, files.cafile),
    ]  # fmt: skip
    with (
        open(directory / "tansu.log", "wb") as broker_log,
        DevBroker(plain_port, log=broker_log, advertised_port=tls_port),
        stunnel(directory, "stunnel", services),
    ):
        yield TlsBroker(f"127.0.0.1:{tls_port}", files, f"127.0.0.1:{misnamed_port}", plain_port)


@contextmanager
def misnamed_tunnel(broker: TlsBroker, directory: Path, port: int) -> Iterator[None]:
    """Another stunnel to the broker on `port`, showing the certificate for another host
    name (a broker that comes up, or changes its certificate, while the app runs)."""
    files = broker.files
    service = stunnel_service("late", port, broker.plain_port, files.misnamed_cert,
                       files.misnamed_key, files.cafile)  # fmt: skip
    with stunnel(directory, "stunnel-late", [service]):
        yield
