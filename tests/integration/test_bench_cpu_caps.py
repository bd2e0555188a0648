"""The scale-out benchmark's worker quota on the real kernel (bench/scale/cpu_caps.py): a
busy process on a host under `--worker-cpu 0.1` gets a tenth of a core, and the same
process on a host without a quota (the positive control), measured the same way, gets far
more (a core, less what the suite's other tests take)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.harness.proc_cpu import namespace_inodes, namespace_pids
from bench.scale.cpu_caps import CpuCaps
from tests.integration import netns

pytestmark = pytest.mark.netns

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


def _spinning(host: netns.Host) -> subprocess.Popen[bytes]:
    """A busy process on `host`, once it runs there (this Python, not a PATH shim that
    could fork: `ip netns exec` enters the namespace and execs it under the same pid)."""
    proc: subprocess.Popen[bytes] = host.popen([sys.executable, "-c", SPIN])
    deadline = time.monotonic() + 30
    while proc.pid not in namespace_pids(namespace_inodes([host.netns])):
        assert time.monotonic() < deadline, f"pid {proc.pid} never ran on {host.name}"
        time.sleep(0.05)
    return proc


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _share(pid: int, seconds: float = 3.0) -> float:
    """The share of a core the process used over `seconds`."""
    before, start = _cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    return (_cpu_s(pid) - before) / (time.monotonic() - start)


def test_a_worker_host_under_a_quota_gets_its_share_of_a_core(network: netns.Network) -> None:
    held, free = network.add_host("wa"), network.add_host("wb")
    # One already running on the held host (a worker daemon), one started after (plain
    # Python's process, added by its pid), and one on the free host.
    early = _spinning(held)
    with CpuCaps({"wa": held.netns}, 0.1) as caps:
        late = held.popen([sys.executable, "-c", SPIN])
        caps.add("wa", late.pid)
        other = _spinning(free)
        try:
            assert early.pid in caps.members("wa")
            time.sleep(0.5)
            shares = {name: _share(p.pid) for name, p in (("early", early), ("late", late),
                                                           ("free", other))}  # fmt: skip
        finally:
            for proc in (early, late, other):
                proc.kill()
                proc.wait()
    # The quota is the host's: its two processes share a tenth of a core.
    assert shares["early"] + shares["late"] < 0.15, shares
    assert shares["free"] > 0.3, shares
    assert not caps.groups["wa"].exists()
