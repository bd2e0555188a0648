"""Stopping a process group (SIGTERM, a grace time, SIGKILL) and probing what is left of it.

A process started with `start_new_session=True` leads a group of its own (its id is the
group's), which holds everything it starts: a driver's JVM and Python workers, a script's
children. Its group outlives it while any of them runs. Used by the tests and benchmarks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

# How long the members of a SIGKILLed group may take to be gone (and reaped).
KILL_TIMEOUT = 30.0


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still exists (a zombie counts until reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def group_gone(pgid: int, timeout: float = KILL_TIMEOUT) -> bool:
    """Whether every process of group `pgid` has ended within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to every process of group `pgid`; False if none is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


def kill_group(proc: subprocess.Popen[Any], timeout: float = KILL_TIMEOUT) -> bool:
    """SIGKILL the group `proc` leads, reap `proc`; whether the whole group ended in time."""
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait(timeout=timeout)
    return group_gone(proc.pid, timeout)


def stop_group(
    proc: subprocess.Popen[Any],
    grace: float,
    *,
    leader_only: bool = False,
    kill_timeout: float = KILL_TIMEOUT,
) -> bool:
    """SIGTERM the group `proc` leads, SIGKILL it after `grace` s; whether all of it ended.

    leader_only: SIGTERM `proc` alone, which stops its children itself (a driver its JVM,
    as on a supervisor's SIGTERM); the group is SIGKILLed all the same if any of it is
    left after `grace`. `proc` is reaped either way.
    """
    if leader_only:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    else:
        signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    else:
        if group_gone(proc.pid, max(0.0, deadline - time.monotonic())):
            return True
    return kill_group(proc, kill_timeout)
