"""`streaming-app demo`: a built-in stand-in for `nc -lk` serving a bundled text, and the app."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from importlib import resources

from streaming_app.errors import ConfigError
from streaming_app.settings.loading import load_config

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
DEMO_STATE = "demo.json"
# After the last line is sent, before the context stops: more than two block intervals
# (spark.streaming.blockInterval, 200 ms), so that the receiver has stored its last block.
SETTLE_SECONDS = 1.0


def sample_lines() -> list[str]:
    """The bundled sample text, one entry per line."""
    text = resources.files("streaming_app").joinpath("data/sample.txt").read_text("utf-8")
    return [line for line in text.splitlines() if line.strip()]


class LineServer:
    """Serves lines over TCP on loopback, cycling through them at a fixed rate (like `nc -lk`)."""

    def __init__(self, lines: list[str], rate: float, port: int = 0, host: str = LOOPBACK):
        self._lines = lines
        self._interval = 1.0 / rate
        self._stopped = threading.Event()
        self._paused = threading.Event()
        self._sock = socket.create_server((host, port))
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self.sent = 0
        self._thread = threading.Thread(target=self._serve, name="line-server", daemon=True)

    def start(self) -> LineServer:
        """Start accepting connections in the background."""
        self._thread.start()
        return self

    def quiesce(self, settle: float = SETTLE_SECONDS) -> None:
        """Stop sending but keep the connection, then give the receiver time to store it all.

        Spark stops a receiver's write-ahead log before its last block is pushed, so lines
        still arriving at the stop would be dropped with an error (see conf/log4j2.properties).
        """
        self._paused.set()
        time.sleep(settle)

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self._stopped.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            # One client at a time, as `nc -lk` does; the Spark receiver is the only one.
            with conn:
                self._feed(conn)

    def _feed(self, conn: socket.socket) -> None:
        index = 0
        while not self._stopped.is_set():
            if self._paused.is_set():
                self._stopped.wait(self._interval)
                continue
            line = self._lines[index % len(self._lines)]
            try:
                conn.sendall((line + "\n").encode("utf-8"))
            except OSError:
                return  # the receiver went away; wait for it to reconnect
            self.sent += 1
            index += 1
            self._stopped.wait(self._interval)


def _demo_port(checkpoint_dir: str, requested: int | None) -> int:
    # A recovered context reconnects to the port stored in its checkpoint, so the
    # demo serves on the port of the first run of this checkpoint directory.
    state_file = os.path.join(checkpoint_dir, DEMO_STATE)
    try:
        with open(state_file, encoding="utf-8") as handle:
            remembered = int(json.load(handle)["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return requested or 0
    if requested and requested != remembered:
        log.warning(
            "this checkpoint was created with port %d; using it, not %d", remembered, requested
        )
    return remembered


def _remember_port(checkpoint_dir: str, port: int) -> None:
    os.makedirs(checkpoint_dir, exist_ok=True)
    temp = os.path.join(checkpoint_dir, f".{DEMO_STATE}.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump({"port": port}, handle)
    os.replace(temp, os.path.join(checkpoint_dir, DEMO_STATE))


def run_demo(
    checkpoint_dir: str | None,
    duration: float,
    port: int | None,
    rate: float,
    batch_interval: float,
    output_dir: str | None,
) -> int:
    """Serve the sample text and run the app on it locally; returns the exit code."""
    from streaming_app.dstream.run import run
    from streaming_app.lifecycle.checks import ensure_writable_dir

    temporary = checkpoint_dir is None
    checkpoint_dir = os.path.abspath(checkpoint_dir or tempfile.mkdtemp(prefix="streaming-app-"))
    ensure_writable_dir("--checkpoint-dir", checkpoint_dir)
    if output_dir:
        ensure_writable_dir("--output-dir", output_dir)
    serve_port = _demo_port(checkpoint_dir, port)
    try:
        server = LineServer(sample_lines(), rate, serve_port)
    except OSError as exc:
        where = "--port" if serve_port == port else f"port remembered in {checkpoint_dir}"
        raise ConfigError(
            f"{where}: cannot listen on {LOOPBACK}:{serve_port}: {exc.strerror or exc}"
        ) from None
    _remember_port(checkpoint_dir, server.port)
    settings = {
        "source": "socket",
        "host": LOOPBACK,
        "port": str(server.port),
        "master": "local[2]",
        "checkpoint_dir": checkpoint_dir,
        "batch_interval": str(batch_interval),
        # Five batches: within the usual guidance, and a visible state checkpoint soon.
        "checkpoint_interval": str(round(batch_interval * 5, 3)),
        # A snapshot a minute: the demo's short runs on small machines keep up with
        # their batches, so that a graceful stop finishes in time.
        "snapshot_interval": str(round(batch_interval * 60, 3)),
        "duration": str(duration) if duration else "",
        "sinks": "console,files" if output_dir else "console",
        "output_dir": output_dir or "",
    }
    config = load_config(env={}, cli=settings)
    log.info("demo: serving the sample text on %s:%d at %g lines/s", LOOPBACK, server.port, rate)
    server.start()
    started = time.monotonic()
    try:
        code = run(config, quiesce=server.quiesce)
    finally:
        server.stop()
        if temporary:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
    log.info("demo: sent %d lines in %.0f s", server.sent, time.monotonic() - started)
    if temporary:
        log.info("demo: to see recovery, run `streaming-app demo --checkpoint-dir DIR` twice")
    else:
        log.info("demo: run the same command again to resume from %s", checkpoint_dir)
    return code
