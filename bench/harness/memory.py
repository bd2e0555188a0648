"""Memory over time: the resident memory of an app's driver, JVM and Python workers, sampled.

PeakMemory (bench/harness/processes.py) keeps the peaks of a run; RssTimeline also keeps
every sample with its wall-clock time, so that the memory of given batches (those that write a
snapshot, say) and its trend over a long run can be read off. Pure functions below it.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.harness.processes import PeakMemory, role, status_kb
from streaming_app.common.metrics_record import BatchMetrics

# The figures of a sample, in kB: driver and JVM as resident set (VmRSS), the Python
# workers as the sum of their proportional set sizes (they share the daemon's pages).
# Compared with PeakMemory's VmHWM, a sample can miss a peak shorter than its interval.
FIELDS = ("driver_kb", "jvm_kb", "workers_kb")


@dataclass(frozen=True)
class Sample:
    """One sample of the app's processes."""

    at: float  # time.time()
    driver_kb: int
    jvm_kb: int
    workers_kb: int
    workers: int  # how many Python worker processes (the daemon among them)


class RssTimeline(PeakMemory):
    """PeakMemory that also records every sample (driver, JVM, workers together)."""

    def __init__(self, sid: int, every: float = 0.25) -> None:
        self.samples: list[Sample] = []
        super().__init__(sid, every)

    def _sample(self, processes: dict[int, str]) -> None:
        super()._sample(processes)
        found = {"driver": 0, "jvm": 0, "workers": 0}
        workers = 0
        for pid, command in processes.items():
            kind = role(command)
            if kind == "workers":
                workers += 1
                found[kind] += status_kb(pid, "Pss", "smaps_rollup")
            elif kind in found:
                # The largest, not the sum: a JVM that forks a command (Hadoop's Shell) has
                # for a moment a child with its command line and its pages.
                found[kind] = max(found[kind], status_kb(pid, "VmRSS"))
        self.samples.append(
            Sample(time.time(), found["driver"], found["jvm"], found["workers"], workers)
        )

    def rows(self) -> list[dict[str, Any]]:
        """The samples, for JSON."""
        return [asdict(s) for s in self.samples]


def batch_window(batch: BatchMetrics, margin_s: float = 0.25) -> tuple[float, float]:
    """When a batch ran, in time.time() seconds: its processing time up to its completion
    (the driver's wall clock), widened by `margin_s` each side for the sampling interval."""
    end = batch.completed_ms / 1000
    return end - (batch.processing_ms or 0) / 1000 - margin_s, end + margin_s


def peak_during(samples: list[Sample], windows: list[tuple[float, float]]) -> dict[str, int | None]:
    """The largest sample of each field (MiB) taken within any of the windows; None: no
    sample fell in one."""
    inside = [s for s in samples if any(start <= s.at <= end for start, end in windows)]
    return {
        field.removesuffix("_kb") + "_mib": (
            round(max(getattr(s, field) for s in inside) / 1024) if inside else None
        )
        for field in FIELDS
    }


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of (seconds, value) points, per hour; None for fewer than
    two distinct times."""
    if len({t for t, _ in points}) < 2:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return 3600 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def trend(samples: list[Sample], field: str, since: float) -> dict[str, float | None]:
    """One field's course (MiB) over the samples taken from `since` on: the first, the last,
    the peak, and the slope per hour over them all and over their second half (a value
    that settles shows a smaller slope there; one that leaks does not)."""
    return course([(s.at, getattr(s, field)) for s in samples], since)


def course(points: list[tuple[float, int]], since: float) -> dict[str, float | None]:
    """trend() of (time.time(), kB) points."""
    kept = [(at, kb / 1024) for at, kb in points if at >= since]
    if not kept:
        return dict.fromkeys(
            ("start_mib", "end_mib", "peak_mib", "slope_mib_h", "late_slope_mib_h")
        )
    middle = kept[0][0] + (kept[-1][0] - kept[0][0]) / 2
    slope, late = slope_per_hour(kept), slope_per_hour([p for p in kept if p[0] >= middle])
    return {
        "start_mib": round(kept[0][1]),
        "end_mib": round(kept[-1][1]),
        "peak_mib": round(max(v for _, v in kept)),
        "slope_mib_h": None if slope is None else round(slope, 1),
        "late_slope_mib_h": None if late is None else round(late, 1),
    }


# `jcmd <pid> GC.heap_info`'s first line: " garbage-first heap   total 262144K, used 52224K".
HEAP_USED = re.compile(r"heap\s+total \d+K, used (\d+)K")


def heap_after_full_gc(pid: int) -> int | None:
    """The JVM's used heap in kB right after a full collection (`jcmd GC.run`, then
    `GC.heap_info`): what the heap holds that is still reachable; None if jcmd failed."""
    try:
        subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        info = subprocess.run(
            ["jcmd", str(pid), "GC.heap_info"], capture_output=True, timeout=60, check=True
        ).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    found = HEAP_USED.search(info)
    return int(found.group(1)) if found else None
