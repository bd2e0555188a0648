"""Certificates for the tests' TLS servers, made with the `openssl` command: a CA of the
test's own and a server certificate it signs for the addresses a client connects to."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DAYS = "2"  # a test's certificates outlive the test, not much more


@dataclass(frozen=True)
class Ca:
    """A certificate authority: its certificate (what clients trust) and its key (PEM)."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class ServerCert:
    """A server's certificate and key (PEM), signed by `ca`."""

    cert: Path
    key: Path
    ca: Ca


def unavailable() -> str | None:
    """Why certificates cannot be made here (one line), or None if they can."""
    return None if shutil.which("openssl") else "TLS tests need the `openssl` command"


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args[:2])}: {done.stderr.strip()}")


def make_ca(directory: Path, name: str) -> Ca:
    """A self-signed CA named `name`, its files in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", DAYS, "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", str(key), "-out", str(cert),
    )  # fmt: skip
    return Ca(cert, key)


def make_server_cert(ca: Ca, directory: Path, name: str, hosts: Sequence[str]) -> ServerCert:
    """A server certificate signed by `ca` for `hosts` (IP addresses or DNS names): the
    first is its CN, all are its subject alternative names."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key, csr = (directory / f"{name}.{ext}" for ext in ("crt", "key", "csr"))
    ext = directory / f"{name}.ext"
    names = ",".join(f"{'IP' if _is_ip(h) else 'DNS'}:{h}" for h in hosts)
    ext.write_text(
        f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n",
        encoding="utf-8",
    )
    _openssl(
        "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={hosts[0]}",
        "-keyout", str(key), "-out", str(csr),
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
        "-CAcreateserial", "-days", DAYS, "-extfile", str(ext), "-out", str(cert),
    )  # fmt: skip
    return ServerCert(cert, key, ca)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
