"""The scale-out benchmark's worker quota on the real kernel (bench/scale/cpu_caps.py): a
busy process on a host under `--worker-cpu 0.1` gets a tenth of a core, and the same
process on a host without a quota (the positive control), measured the same way, gets far
more (a core, less what the suite's other tests take)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bench.scale.cpu_caps import CpuCaps
from tests.integration import netns

pytestmark = pytest.mark.netns

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


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
    early = held.popen(["python3", "-c", SPIN])
    with CpuCaps({"wa": held.netns}, 0.1) as caps:
        late = held.popen(["python3", "-c", SPIN])
        caps.add("wa", late.pid)
        other = free.popen(["python3", "-c", SPIN])
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
