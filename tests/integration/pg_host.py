"""A PostgreSQL server of the test's own on a namespace host: initdb, postgres, a Unix socket.

The server listens on the host's address (for the app, on another host) and on a Unix
socket in its own directory, which the test reaches from the root namespace whatever
the host's link is doing: the file system is shared, the network is not. Run as the
`postgres` OS user (initdb refuses root); trust authentication, this test's /24 only.
With `tls` (a server certificate) and a `password`, the network is served over TLS alone
(`ssl=on`, `hostssl ... scram-sha-256`, no `host` line: a plain connection is refused);
the Unix socket stays trusted, for the test.

The directory, under /tmp (pytest's own is root's alone), is named for the test process
(`sa-pg-<PID>-...`), so that what a killed test run left behind is removed by the next
run (`remove_stale_server_dirs`), as its namespaces are.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.integration.harness import wait_for
from tests.integration.netns import Host, pid_alive
from tests.integration.pg_helpers import ci
from tests.integration.tls_certs import ServerCert

PORT = 5432  # the host's own network: nothing else listens there
OS_USER = "postgres"
DIR_PREFIX = "sa-pg-"
# A directory named before the test process was (sa-pg-XXXXXXXX) is left alone this long:
# it may be another checkout's test, still running initdb.
UNNAMED_GRACE_SECONDS = 3600.0


def server_binaries() -> Path | None:
    """The newest /usr/lib/postgresql/N/bin that has initdb and postgres, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


class PgHost:
    """One PostgreSQL server on `host`; `dsn` for the app, `local_dsn` for the test."""

    def __init__(
        self,
        host: Host,
        bin_dir: Path,
        tls: ServerCert | None = None,
        password: str | None = None,
    ) -> None:
        assert (tls is None) == (password is None), "TLS and a password go together"
        self.host = host
        self.bin_dir = bin_dir
        self.tls = tls
        self.password = password
        # Not under pytest's tmp_path: its parents are root's alone (0700).
        self.dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
        self.data = self.dir / "data"
        shutil.chown(self.dir, OS_USER, OS_USER)
        self.proc: subprocess.Popen[Any] | None = None
        self.local_dsn = f"host={self.dir} port={PORT} user=postgres dbname=postgres"

    def dsn(self, **options: str) -> str:
        """The key=value DSN the app uses, over the network, with libpq `options`."""
        extra = "".join(f" {k}={v}" for k, v in options.items())
        return f"host={self.host.address} port={PORT} user=postgres dbname=postgres{extra}"

    def start(self, timeout: float = 60) -> None:
        """initdb, allow this network, start the server and wait until it answers."""
        initdb = subprocess.run(
            [
                "runuser", "-u", OS_USER, "--", str(self.bin_dir / "initdb"), "-D",
                str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C",
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert initdb.returncode == 0, initdb.stderr
        self._write_hba()
        log = open(self.dir / "server.log", "wb")  # noqa: SIM115 (the server's for its life)
        self.proc = self.host.popen(
            [
                "runuser", "-u", OS_USER, "--", str(self.bin_dir / "postgres"), "-D",
                str(self.data), "-p", str(PORT), "-c", f"listen_addresses={self.host.address}",
                "-c", f"unix_socket_directories={self.dir}", "-c", "fsync=off",
                *self._tls_options(),
            ],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        wait_for("PostgreSQL to answer", self._answers, timeout, proc=self.proc, detail=self.log)
        if self.password is not None:
            self.set_password(self.password)

    def _answers(self) -> bool:
        """Whether the server takes a connection (on its Unix socket)."""
        try:
            psycopg.connect(self.local_dsn, connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def _write_hba(self) -> None:
        """Trust this test's /24, or (with TLS) only TLS connections with a scram password."""
        path = self.data / "pg_hba.conf"
        if self.tls is None:
            with open(path, "a", encoding="utf-8") as hba:
                hba.write(f"host all all {self.host.network.subnet} trust\n")
            return
        # Replaces initdb's file: its `host` lines for loopback would accept plain TCP.
        path.write_text(
            f"local all all trust\nhostssl all all {self.host.network.subnet} scram-sha-256\n",
            encoding="utf-8",
        )

    def _tls_options(self) -> list[str]:
        """The server's TLS settings: its certificate and key copied where it may read them."""
        if self.tls is None:
            return []
        cert, key = self.dir / "server.crt", self.dir / "server.key"
        shutil.copyfile(self.tls.cert, cert)
        shutil.copyfile(self.tls.key, key)
        for path in (cert, key):
            shutil.chown(path, OS_USER, OS_USER)
            path.chmod(0o600)  # the server refuses a key others can read
        return ["-c", "ssl=on", "-c", f"ssl_cert_file={cert}", "-c", f"ssl_key_file={key}"]

    def set_password(self, password: str) -> None:
        """Give the `postgres` role a (new) password, scram-hashed by the server."""
        with psycopg.connect(self.local_dsn, autocommit=True) as conn:
            # ALTER ROLE takes no parameters: the password goes in as a quoted literal.
            conn.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(password)))
        self.password = password

    def log(self) -> str:
        """What the server wrote so far."""
        path = self.dir / "server.log"
        return path.read_text("utf-8", errors="replace") if path.exists() else ""

    def set_config(self, name: str, value: str | None) -> None:
        """ALTER SYSTEM SET (or RESET, for None) a setting, then reload the configuration."""
        with psycopg.connect(self.local_dsn, autocommit=True) as conn:
            if value is None:
                conn.execute(f"ALTER SYSTEM RESET {name}")
            else:
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            conn.execute("SELECT pg_reload_conf()")

    def stop(self, timeout: float = 30) -> None:
        """Fast shutdown (SIGINT to the postmaster), then remove the data directory."""
        pid_file = self.data / "postmaster.pid"
        if self.proc is not None and self.proc.poll() is None and pid_file.exists():
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):  # close() kills the group
                self.proc.wait(timeout=timeout)
        shutil.rmtree(self.dir, ignore_errors=True)


def _owner(name: str) -> int | None:
    """The pid of the test process a server directory is named for (sa-pg-<PID>-...)."""
    named = re.match(rf"{DIR_PREFIX}(\d+)-", name)
    return int(named[1]) if named else None


def _server_pid(directory: Path) -> int | None:
    """The postmaster's pid its data directory records, if any."""
    try:
        return int((directory / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stale_server_dirs(
    parent: Path, alive: Callable[[int], bool], now: float | None = None
) -> list[Path]:
    """The server directories under `parent` that a test process no longer alive made,
    and whose server no longer runs: what a killed test run left behind.

    One named before the test process was (no pid) counts once its server is gone and it
    is older than UNNAMED_GRACE_SECONDS.
    """
    now = time.time() if now is None else now
    stale = []
    for path in sorted(parent.glob(DIR_PREFIX + "*")):
        if not path.is_dir() or path.is_symlink():
            continue
        server = _server_pid(path)
        if server is not None and alive(server):
            continue
        owner = _owner(path.name)
        if owner is not None:
            if owner == os.getpid() or alive(owner):
                continue
        elif now - path.stat().st_mtime < UNNAMED_GRACE_SECONDS:
            continue
        stale.append(path)
    return stale


def remove_stale_server_dirs(parent: Path | None = None) -> list[Path]:
    """Remove what `stale_server_dirs` finds under /tmp (or `parent`); the paths removed."""
    stale = stale_server_dirs(Path(parent or tempfile.gettempdir()), pid_alive)
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


@contextmanager
def pg_on(
    host: Host, tls: ServerCert | None = None, password: str | None = None
) -> Iterator[PgHost]:
    """A started server on `host` (skip if no server binaries are installed; in CI, fail),
    stopped after; with `tls` and `password`, TLS and scram passwords only (see PgHost)."""
    bin_dir = server_binaries()
    if bin_dir is None:
        reason = "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
        if ci():
            pytest.fail(reason)
        pytest.skip(reason)
    server = PgHost(host, bin_dir, tls=tls, password=password)
    try:
        server.start()
        yield server
    finally:
        server.stop()
