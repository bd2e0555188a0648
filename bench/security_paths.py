"""Where a secured Kafka read's time goes: straight, through a plain hop, over TLS.

stunnel in front of tansu is one more process on the path, which a broker that speaks TLS
itself would not add. So one kafka-python consumer (the baseline's, `Counter` included)
reads the same corpus three ways, alternated: from tansu itself, through a plain TCP
forwarder (socat: the hop without the encryption), and over TLS with a client certificate
through stunnel. The hop's cost is the second against the first; the encryption's (the
client's decryption in this process, stunnel's encryption in its own) the third against
the second. Also the CPU time of a process found by a unique part of its command line
(stunnel's, during the app's runs).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.harness import baseline_seconds, load_topic, median, session_processes
from bench.micro import cpu_seconds
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker, free_port

STRAIGHT, HOP, TLS = "straight to tansu", "through a plain hop (socat)", "over TLS (stunnel)"


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"socat exited with code {proc.returncode} at start")
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        time.sleep(0.1)
    raise RuntimeError(f"socat did not listen on 127.0.0.1:{port} within {timeout} s")


@contextlib.contextmanager
def plain_hop(workdir: Path) -> Iterator[KafkaConnection | None]:
    """A tansu of its own behind socat, advertising socat's port (so every connection
    takes the hop, as every connection takes stunnel on the TLS side); both stopped.
    None where socat is not installed (Debian: socat): the hop is then not measured."""
    if shutil.which("socat") is None:
        yield None
        return
    hop_port = free_port()
    with (
        open(workdir / "hop-tansu.log", "wb") as log,
        DevBroker(log=log, advertised_port=hop_port) as broker,
        open(workdir / "socat.log", "wb") as socat_log,
    ):
        proc = subprocess.Popen(
            ["socat", f"TCP-LISTEN:{hop_port},bind=127.0.0.1,reuseaddr,fork",
             f"TCP:127.0.0.1:{broker.port}"],
            stdin=subprocess.DEVNULL, stdout=socat_log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its forks per connection go with it
        )  # fmt: skip
        try:
            _wait_listening(hop_port, proc)
            yield KafkaConnection(f"127.0.0.1:{hop_port}")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)


def reads(routes: dict[str, KafkaConnection], lines: int, repeats: int) -> dict[str, float]:
    """µs a line of the baseline consumer's read by each route (its own topic of the same
    corpus), the routes alternated `repeats` times; medians."""
    topics = {name: load_topic(connection, lines) for name, connection in routes.items()}
    seconds: dict[str, list[float]] = {name: [] for name in routes}
    for _ in range(repeats):
        for name, connection in routes.items():
            seconds[name].append(baseline_seconds(connection, topics[name], lines))
    return {name: round(median(s) * 1e6 / lines, 2) for name, s in seconds.items()}


def process_cpu_s(marker: str) -> Callable[[], float]:
    """CPU seconds used so far by the one process whose command line holds `marker`
    (NaN if there is none)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in command:
            stat = proc / "stat"
            return lambda: _cpu(stat)
    return lambda: float("nan")


def session_cpu_s(sid: int) -> float:
    """CPU seconds of a session's processes (AppRun starts the app in its own: the
    driver, its JVM, the Python workers), their reaped children's included."""
    total = 0.0
    for pid in session_processes(sid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return round(total / os.sysconf("SC_CLK_TCK"), 2)


def _cpu(stat: Path) -> float:
    try:
        return cpu_seconds(stat)
    except OSError:
        return float("nan")


def paths_report(us: dict[str, float], lines: int, repeats: int) -> list[str]:
    """The read paths' table for docs/benchmarks.md."""
    straight, tls = us[STRAIGHT], us[TLS]
    hop = us.get(HOP)
    table = [
        f"**Where a secured Kafka read's time goes** (one kafka-python consumer + `Counter`, "
        f"in one process, reading {lines:,} lines of the same corpus each way, the ways "
        f"alternated, medians of {repeats}; µs a line, wall time):",
        "",
        "| path | µs a line | against straight |",
        "|---|---|---|",
        f"| {STRAIGHT} | {straight} | 1.0 |",
    ]
    if hop is not None:
        table.append(f"| {HOP}: the extra process alone | {hop} | {round(hop / straight, 2)} |")
    table += [f"| {TLS}, client certificate | {tls} | {round(tls / straight, 2)} |", ""]
    if hop is None:
        return [*table, "The plain hop was not measured: socat is not installed."]
    return [
        *table,
        f"The hop costs {round(hop - straight, 2)} µs a line, the encryption (client and "
        f"stunnel) {round(tls - hop, 2)} µs on top.",
    ]
