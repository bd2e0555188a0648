"""Every CPU second of a run, per process, from /proc: what each process class spent.

A sampler reads /proc/<pid>/stat (utime + stime) of every process on the run's hosts (the
processes whose network namespace is one of theirs) every `every` seconds, and the machine's
busy time from /proc/stat. A window's CPU per process is its last sample in the window
less its last sample before it (0 for a process born inside it: a new process starts at
0); a process that ends inside the window loses at most one interval of its time, which
its parent's cutime would hold (not counted, so that nothing counts twice).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")

# (class, what in its command line says so), first match wins: the order matters (the
# driver's JVM runs SparkSubmit with spark_main.py as an argument; the executors' Python
# daemon is started by their JVM with `-m pyspark.daemon` or the app's worker daemon).
CLASSES = (
    ("executor JVM", "CoarseGrainedExecutorBackend"),
    ("driver JVM", "org.apache.spark.deploy.SparkSubmit"),
    ("master", "org.apache.spark.deploy.master.Master"),
    ("worker daemon", "org.apache.spark.deploy.worker.Worker"),
    ("driver Python", "spark_main.py"),
    ("Python workers", "daemon"),
    ("Python workers", "pyspark.worker"),
    ("plain Python", "bench.scale.plain"),
    ("broker", "tansu"),
    # The postmaster (its binary's path) and its backends (their titles); not the word in
    # an app's arguments (`--sink postgres`).
    ("PostgreSQL", "/bin/postgres "),
    ("PostgreSQL", "postgres: "),
)


def process_class(command: str) -> str:
    """Which part of the run a process is, from its command line (NUL-separated or not)."""
    for name, marker in CLASSES:
        if marker in command:
            return name
    return "other"


def stat_ticks(stat: str) -> int:
    """utime + stime (clock ticks) from the text of /proc/<pid>/stat; the command name,
    in parentheses, may hold spaces and parentheses itself, so fields count from the last
    `)`."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def busy_ticks(proc_stat: str) -> tuple[int, int]:
    """(busy, total) clock ticks of the whole machine from /proc/stat's `cpu` line: busy is
    everything but idle and iowait (guest time is inside user already)."""
    for line in proc_stat.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            total = sum(values[:8])
            return total - values[3] - values[4], total
    raise ValueError("no cpu line in /proc/stat")


@dataclass
class Samples:
    """Per pid: its class and (epoch seconds, CPU seconds) samples; and the machine's."""

    classes: dict[int, str] = field(default_factory=dict)
    series: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    machine: list[tuple[float, float]] = field(default_factory=list)

    def add(self, pid: int, kind: str, at: float, cpu_s: float) -> None:
        self.classes.setdefault(pid, kind)
        self.series.setdefault(pid, []).append((at, cpu_s))


def _at_or_before(series: list[tuple[float, float]], moment: float) -> float | None:
    """The last sample's CPU seconds at or before `moment` (None: none then)."""
    index = bisect.bisect_right([t for t, _ in series], moment)
    return series[index - 1][1] if index else None


def window_cpu(samples: Samples, start: float, end: float) -> dict[int, float]:
    """CPU seconds each process spent between `start` and `end` (epoch seconds)."""
    spent = {}
    for pid, series in samples.series.items():
        last = _at_or_before(series, end)
        if last is None:
            continue  # born after the window
        first = _at_or_before(series, start)
        if first is None and series[0][0] > end:
            continue
        spent[pid] = max(0.0, last - (first or 0.0))
    return spent


def by_class(samples: Samples, spent: dict[int, float]) -> dict[str, float]:
    """CPU seconds summed per process class, largest first."""
    totals: dict[str, float] = {}
    for pid, seconds in spent.items():
        kind = samples.classes[pid]
        totals[kind] = totals.get(kind, 0.0) + seconds
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def machine_busy_s(samples: Samples, start: float, end: float) -> float:
    """The whole machine's busy CPU seconds in the window (every process, ours or not)."""
    first = _at_or_before(samples.machine, start)
    last = _at_or_before(samples.machine, end)
    return 0.0 if first is None or last is None else last - first


def namespace_inodes(names: Iterable[str]) -> set[int]:
    """The inodes of these network namespaces (`ip netns` mounts them in /run/netns)."""
    return {os.stat(f"/run/netns/{name}").st_ino for name in names}


def namespace_pids(inodes: set[int]) -> list[int]:
    """The pids of every process in the network namespaces of these inodes now (read from
    /proc/<pid>/ns/net, in this process: no `ip` started every sample)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError):
                link = os.readlink(entry / "ns" / "net")  # net:[4026532xxx]
                if int(link[link.index("[") + 1 : -1]) in inodes:
                    pids.append(int(entry.name))
    return pids


class CpuSampler:
    """Samples every process of the namespaces given every `every` s until stopped."""

    def __init__(self, namespaces: list[str], every: float = 0.5) -> None:
        self.inodes = namespace_inodes(namespaces)
        self.every = every
        self.samples = Samples()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self) -> None:
        """One sample of every process on the hosts, and of the machine."""
        now = time.time()
        busy, _ = busy_ticks(Path("/proc/stat").read_text())
        self.samples.machine.append((now, busy / TICK))
        for pid in namespace_pids(self.inodes):
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                # Read every time: a shell (scripts/submit.sh) execs its command later under
                # the same pid, and the class is what the process runs last.
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                kind = process_class(command.decode(errors="replace"))
                self.samples.classes[pid] = kind
                self.samples.add(pid, kind, now, stat_ticks(stat) / TICK)

    def stop(self) -> Samples:
        """Stop sampling (after one last sample); everything sampled."""
        self._stop.set()
        self._thread.join()
        self.sample()
        return self.samples
