"""Worker hosts held to a share of a core: a CPU quota (cgroups) for `--worker-cpu`.

A worker "of one core" (SPARK_WORKER_CORES=1) runs one task at a time, but its executor's
JVM and Python worker, and the driver and broker beside them, all draw on the machine's
two cores: one worker already uses more than a core. With a quota on each worker host,
each worker has what a core of its own would give it (scaled to the share), the driver,
broker and master have the rest, and plain Python's processes on the same hosts get the
same quota: two workers against one is then what adding a machine's core to a cluster
is, on a machine too small to give each its own.

Every process of a worker host's network namespace goes into its group (the Spark worker
daemon; the executors and Python workers it starts later inherit the group), and so
does each process started on that host afterwards (`add`). cgroup v2 (`cpu.max`) where
the unified hierarchy has the cpu controller, else v1's cpu controller
(`cpu.cfs_quota_us`). Needs root.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import TracebackType

from bench.harness.proc_cpu import namespace_inodes, namespace_pids

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def quota_us(share: float, period_us: int = PERIOD_US) -> int:
    """The CPU time a period that gives `share` of one core (at least 1 ms a period)."""
    if not 0 < share <= 64:
        raise ValueError(f"a worker's CPU share must be above 0, not {share}")
    return max(1000, round(share * period_us))


def controller_root(root: Path = ROOT) -> tuple[Path, int]:
    """Where groups with a CPU quota are made, and the cgroup version (2 or 1)."""
    controllers = root / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return root, 2
    if (root / "cpu" / "cpu.cfs_quota_us").is_file():
        return root / "cpu", 1
    raise SystemExit(f"error: --worker-cpu needs cgroups' cpu controller under {root}")


class CpuCaps:
    """One group a worker host, each with a quota of `share` of a core."""

    def __init__(self, namespaces: dict[str, str], share: float, root: Path = ROOT) -> None:
        self.namespaces = namespaces  # host name -> its network namespace
        self.share = share
        self.base, self.version = controller_root(root)
        self.groups = {
            name: self.base / f"streaming-app-bench-{os.getpid()}-{name}" for name in namespaces
        }
        self.made: list[Path] = []  # the groups this made, and so removes

    def __enter__(self) -> CpuCaps:
        quota = quota_us(self.share)
        try:
            if self.version == 2:
                # Children of the root get the cpu controller (harmless when they have it).
                (self.base / "cgroup.subtree_control").write_text("+cpu")
            for group in self.groups.values():
                group.mkdir()
                self.made.append(group)
                if self.version == 2:
                    (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
                else:
                    (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                    (group / "cpu.cfs_quota_us").write_text(str(quota))
            self.sweep()
        except BaseException:
            self.__exit__(None, None, None)  # no group left behind
            raise
        return self

    def add(self, host: str, pid: int) -> None:
        """A process just started on `host` (its children inherit the group)."""
        (self.groups[host] / "cgroup.procs").write_text(str(pid))

    def sweep(self) -> None:
        """Every process now in a worker host's namespace into that host's group."""
        for host, netns in self.namespaces.items():
            for pid in namespace_pids(namespace_inodes([netns])):
                with contextlib.suppress(OSError):  # ended meanwhile (ProcessLookupError)
                    self.add(host, pid)

    def members(self, host: str) -> list[int]:
        """The pids in `host`'s group now."""
        return _procs(self.groups[host])

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for group in self.made:
            with contextlib.suppress(OSError):
                for pid in _procs(group):  # what is left goes back to the root group
                    with contextlib.suppress(OSError):  # ended meanwhile
                        (self.base / "cgroup.procs").write_text(str(pid))
            with contextlib.suppress(OSError):
                group.rmdir()
        self.made = []


def _procs(group: Path) -> list[int]:
    """The pids in a group now."""
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
