"""What the intruder tests watch the network with and run on the intruder's host.

`Capture` records every packet on a test network's bridge (tcpdump) and
`tcp_payload_by_port` sums what the capture carried per port; `CommandLines` reads every
process's command line while a test runs, for a secret; `intruder_env` is a user's shell
with PySpark and no secret, and `Intruder` runs tests/integration/intruder.py's actions
(and spark-submit) from it on a host of the network.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from tests.integration.cluster_helpers import ROOT, SPARK_HOME
from tests.integration.harness import wait_for
from tests.integration.netns import Host, Network

ATTEMPT_TIMEOUT = 150  # an application the master never answers gives up after 3 x 20 s


class Capture:
    """tcpdump on the bridge (every packet between the hosts), into a pcap file."""

    def __init__(self, network: Network, path: Path) -> None:
        self.path = path
        self.err = path.with_suffix(".log")
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", network.bridge_ns,
                 "tcpdump", "-i", "br0", "-n", "-U", "-s", "0", "-w", str(path)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )  # fmt: skip
        network.processes.append(self.proc)  # killed by the network at the end, whatever

        def listening() -> bool:
            return b"listening on br0" in self.err.read_bytes()

        wait_for("tcpdump listening", listening, 30, None, 0.1, self.err.read_text, self.proc)

    def stop(self) -> bytes:
        """Stop the capture (SIGINT: tcpdump writes what it holds); the pcap file's bytes."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=30)
        return self.path.read_bytes()


def tcp_payload_by_port(pcap: bytes) -> Counter[int]:
    """Bytes of TCP payload in a pcap capture (Ethernet, IPv4), counted for each port at
    either end."""
    counted: Counter[int] = Counter()
    magic = pcap[:4]
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    pos = 24  # the global header
    while pos + 16 <= len(pcap):
        captured = struct.unpack_from(f"{order}I", pcap, pos + 8)[0]
        frame = pcap[pos + 16 : pos + 16 + captured]
        pos += 16 + captured
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:  # IPv4, TCP
            continue
        ip_header = (frame[14] & 0x0F) * 4
        ip_total = struct.unpack_from(">H", frame, 16)[0]
        tcp = 14 + ip_header
        source, target = struct.unpack_from(">HH", frame, tcp)
        payload = ip_total - ip_header - (frame[tcp + 12] >> 4) * 4
        counted[source] += payload
        counted[target] += payload
    return counted


class CommandLines(threading.Thread):
    """Every process's command line, read twice a second: those that hold the secret."""

    def __init__(self, secret: str) -> None:
        super().__init__(daemon=True)
        self.secret = secret.encode()
        self.halt = threading.Event()
        self.found: set[str] = set()
        self.reads = 0

    def run(self) -> None:
        while not self.halt.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    args = (entry / "cmdline").read_bytes()
                except OSError:  # ended meanwhile
                    continue
                if self.secret in args:
                    program = args.split(b"\0")[0].decode(errors="replace")
                    self.found.add(f"pid {entry.name}: {program}")
            self.reads += 1
            self.halt.wait(0.5)

    def stop(self) -> set[str]:
        self.halt.set()
        self.join(timeout=30)
        return self.found


def intruder_env(workdir: Path) -> dict[str, str]:
    """A user's shell on the intruder's host: PySpark and Spark's scripts, no secret at all."""
    conf_dir = workdir / "intruder-conf"  # empty: no spark-defaults.conf, no spark-env.sh
    conf_dir.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STREAMING_APP_", "SPARK_", "_SPARK")) and k != "PYSPARK_SUBMIT_ARGS"
    }
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_CONF_DIR=str(conf_dir),
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=str(ROOT),
        PATH=f"{SPARK_HOME / 'bin'}:{env.get('PATH', '')}",
    )
    return env


class Intruder:
    """Runs tests/integration/intruder.py's actions (and spark-submit) on a host of the test:
    the intruder's, or the driver's for the file server that serves a file (the control)."""

    def __init__(self, host: Host, workdir: Path) -> None:
        self.host, self.workdir = host, workdir
        self.env = intruder_env(workdir)
        self.started: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def start(self, label: str, *args: str) -> None:
        """An action in the background; its JSON is read by `result`."""
        self.start_command(label, [sys.executable, "-m", "tests.integration.intruder", *args])

    def start_command(self, label: str, command: list[str]) -> None:
        out = self.workdir / f"intruder-{label}.out"
        with open(out, "wb") as handle:
            proc = self.host.popen(
                command, stdout=handle, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT
            )
        self.started[label] = (proc, out)

    def first_json(self, label: str, timeout: float) -> Any:
        """A background action's first JSON line, once it has printed it (it runs on)."""
        proc, out = self.started[label]

        def json_lines() -> list[str]:
            text = out.read_text("utf-8", errors="replace")
            return [line for line in text.splitlines() if line.startswith("{")]

        def tail() -> str:
            return out.read_text("utf-8", errors="replace")[-3000:]

        lines = wait_for(f"{label}'s first JSON line", json_lines, timeout, None, 0.5, tail, proc)
        return json.loads(lines[0])

    def finish(self, label: str, timeout: float = ATTEMPT_TIMEOUT) -> tuple[int, str]:
        """Wait for a background action; its exit code and output."""
        proc, out = self.started[label]
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            raise AssertionError(f"{label}: still running after {timeout} s") from None
        return code, out.read_text("utf-8", errors="replace")

    def result(self, label: str, timeout: float = ATTEMPT_TIMEOUT) -> Any:
        """A background action's JSON (its last line of output)."""
        code, text = self.finish(label, timeout)
        lines = [line for line in text.splitlines() if line.startswith("{")]
        assert code == 0 and lines, f"{label} exited {code}:\n{text[-3000:]}"
        return json.loads(lines[-1])

    def now(self, *args: str, timeout: float = 60) -> Any:
        """An action run to its end; its JSON."""
        done = subprocess.run(
            self.host.command([sys.executable, "-m", "tests.integration.intruder", *args]),
            capture_output=True, text=True, env=self.env, cwd=ROOT, timeout=timeout,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.splitlines()[-1])
