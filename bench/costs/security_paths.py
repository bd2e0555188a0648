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

from bench.harness.corpus import baseline_seconds, load_topic
from bench.harness.processes import session_cpu_s
from bench.harness.results import median
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
def plain_hop(workdir: Path) -> Iterator[Route | None]:
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
            sid = proc.pid  # socat and the child it forks per connection
            yield KafkaConnection(f"127.0.0.1:{hop_port}"), lambda: session_cpu_s(sid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)


# A route: how the consumer connects, and the CPU seconds so far of the process between it
# and tansu (None: nothing between).
Route = tuple[KafkaConnection, Callable[[], float] | None]


def reads(routes: dict[str, Route], lines: int, repeats: int) -> dict[str, dict[str, float]]:
    """Per route, µs a line of the baseline consumer's read (its own topic of the same
    corpus), the routes alternated `repeats` times, medians: wall time, this process's CPU
    (the consumer, its network thread and the decryption) and the forwarder's CPU."""
    topics = {name: load_topic(connection, lines) for name, (connection, _) in routes.items()}
    found: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "client_cpu": [], "forwarder_cpu": []} for name in routes
    }
    for _ in range(repeats):
        for name, (connection, forwarder) in routes.items():
            client, between = time.process_time(), forwarder() if forwarder else 0.0
            found[name]["wall"].append(baseline_seconds(connection, topics[name], lines))
            found[name]["client_cpu"].append(time.process_time() - client)
            found[name]["forwarder_cpu"].append((forwarder() - between) if forwarder else 0.0)
    return {
        name: {kind: round(median(s) * 1e6 / lines, 2) for kind, s in kinds.items()}
        for name, kinds in found.items()
    }


def connects(routes: dict[str, Route], repeats: int) -> dict[str, dict[str, float]]:
    """Per route, ms of one executor read of a single record (the app's `read_range`: a
    consumer of its own, connected, then closed, as every batch does for each partition),
    the routes alternated `repeats` times, medians: wall time, this process's CPU and the
    forwarder's CPU. What a connection costs, which a batch pays per partition."""
    from streaming_app.sources.kafka.offsets import OffsetRange
    from streaming_app.sources.kafka.reader import read_range

    topics = {name: load_topic(connection, 2) for name, (connection, _) in routes.items()}
    found: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "client_cpu": [], "forwarder_cpu": []} for name in routes
    }
    for _ in range(repeats):
        for name, (connection, forwarder) in routes.items():
            one = OffsetRange(topics[name], 0, 0, 1)
            wall, client = time.perf_counter(), time.process_time()
            between = forwarder() if forwarder else 0.0
            if len(list(read_range(one, connection, 1 << 20, "fail"))) != 1:
                raise RuntimeError(f"{name}: a read of one record did not read it")
            found[name]["wall"].append(time.perf_counter() - wall)
            found[name]["client_cpu"].append(time.process_time() - client)
            found[name]["forwarder_cpu"].append((forwarder() - between) if forwarder else 0.0)
    return {
        name: {kind: round(median(s) * 1e3, 1) for kind, s in kinds.items()}
        for name, kinds in found.items()
    }


def paths_report(
    us: dict[str, dict[str, float]],
    lines: int,
    repeats: int,
    connect_ms: dict[str, dict[str, float]] | None = None,
    connect_repeats: int = 0,
) -> list[str]:
    """The read paths' tables for docs/benchmarks.md."""
    straight = us[STRAIGHT]["wall"]
    table = [
        f"**Where a secured Kafka read's time goes** (one kafka-python consumer + `Counter`, "
        f"in one process, reading {lines:,} lines of the same corpus each way, the ways "
        f"alternated, medians of {repeats}; µs a line: wall time, the consumer's own CPU "
        "(its network thread and the decryption included) and the CPU of the process "
        "between it and tansu):",
        "",
        "| path | wall | against straight | the consumer's CPU | the forwarder's CPU |",
        "|---|---|---|---|---|",
    ]
    for name, label in ((STRAIGHT, STRAIGHT), (HOP, f"{HOP}: the extra process alone"),
                        (TLS, f"{TLS}, client certificate")):  # fmt: skip
        if name in us:
            r = us[name]
            table.append(
                f"| {label} | {r['wall']} | {round(r['wall'] / straight, 2)} | "
                f"{r['client_cpu']} | {r['forwarder_cpu'] if name != STRAIGHT else '—'} |"
            )
    table.append("")
    if HOP not in us:
        table.append("The plain hop was not measured: socat is not installed.")
    else:
        hop, tls = us[HOP]["wall"], us[TLS]["wall"]
        table.append(
            f"The hop costs {round(hop - straight, 2)} µs a line, the encryption (client "
            f"and stunnel) {round(tls - hop, 2)} µs on top."
        )
    if connect_ms:
        table += [
            "",
            "**A connection** (the app's executor read, `read_range`, of one record: its own "
            "consumer connected, read and closed, as each batch does for each partition; "
            f"medians of {connect_repeats}, ms):",
            "",
            "| path | wall | the reader's CPU | the forwarder's CPU |",
            "|---|---|---|---|",
            *(
                f"| {name} | {r['wall']} | {r['client_cpu']} | "
                f"{r['forwarder_cpu'] if name != STRAIGHT else '—'} |"
                for name, r in connect_ms.items()
            ),
        ]
    return table
