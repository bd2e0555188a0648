"""A run's processes, found by their session: their roles, CPU time and peak resident memory."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path


def session_processes(sid: int) -> dict[int, str]:
    """The processes of a session (AppRun starts the app in its own): pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[3]) == sid:  # field 6, the session id
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
    return {pid: cmd.decode(errors="replace") for pid, cmd in found.items()}


def role(command: str) -> str:
    """Which part of the app a process is: driver, jvm or python worker."""
    if "streaming_app run" in command:
        return "driver"
    if "java" in command.split(" ", 1)[0]:
        return "jvm"
    return "workers" if "daemon" in command else "other"


def status_kb(pid: int, field: str, name: str = "status") -> int:
    """A /proc/<pid>/<name> figure in kB (status: VmHWM; smaps_rollup: Pss), 0 if gone."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class PeakMemory:
    """Samples the resident memory of an app's processes, by role, until stopped.

    Per process the kernel's high-water mark (VmHWM) is exact. The Python workers are
    forked from one daemon and share its pages, so they are also summed by proportional
    set size (Pss: shared pages divided among their sharers), at the sample with most.
    """

    def __init__(self, sid: int, every: float = 0.5) -> None:
        self.sid = sid
        self.every = every
        self.hwm: dict[int, tuple[str, int]] = {}
        self.workers_together = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample(session_processes(self.sid))
            self._stop.wait(self.every)

    def _sample(self, processes: dict[int, str]) -> None:
        """One sample of the session's processes (pid -> command line)."""
        together = 0
        for pid, command in processes.items():
            kind = role(command)
            peak = status_kb(pid, "VmHWM")
            if peak:
                self.hwm[pid] = (kind, max(peak, self.hwm.get(pid, (kind, 0))[1]))
            if kind == "workers":
                together += status_kb(pid, "Pss", "smaps_rollup")
        self.workers_together = max(self.workers_together, together)

    def stop(self) -> dict[str, float]:
        """Peak MiB: driver, JVM, the largest Python worker, the workers together."""
        self._stop.set()
        self._thread.join()

        def largest(kind: str) -> int:
            return max((kb for k, kb in self.hwm.values() if k == kind), default=0)

        return {
            "driver_mib": round(largest("driver") / 1024),
            "jvm_mib": round(largest("jvm") / 1024),
            "largest_worker_mib": round(largest("workers") / 1024),
            "workers_together_mib": round(self.workers_together / 1024),
        }


def cpu_seconds(stat: Path) -> float:
    """utime + stime of a process, from its /proc/PID/stat."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
