"""Stopping process groups of real subprocesses: SIGTERM, SIGKILL after the grace, grandchildren."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator

import pytest

from streaming_app.tools.processes import (
    group_alive,
    group_gone,
    kill_group,
    signal_group,
    stop_group,
)

pytestmark = pytest.mark.timeout(60)
Start = Callable[[str], tuple[subprocess.Popen[bytes], str]]

# Prints a line once SIGTERM is ignored, then sleeps.
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)
SLEEPS = "import time; print('ready', flush=True); time.sleep(60)"


def _with_child(child_code: str, on_term: str = "") -> str:
    """A leader that starts a child running child_code, prints its pid, then sleeps."""
    return textwrap.dedent(
        f"""
        import signal, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", {child_code!r}], stdout=subprocess.PIPE)
        child.stdout.readline()
        {on_term}
        print(child.pid, flush=True)
        time.sleep(60)
        """
    )


# The leader stops its child on SIGTERM and exits 0 if the child ended by that SIGTERM.
FORWARDS_TERM = (
    "signal.signal(signal.SIGTERM, lambda *_: (child.terminate(), "
    "sys.exit(0 if child.wait() == -signal.SIGTERM else 1)))"
)


@pytest.fixture
def start() -> Iterator[Start]:
    """Start `python -c CODE` in a group of its own; return it and its first line of output."""
    started: list[subprocess.Popen[bytes]] = []

    def run(code: str) -> tuple[subprocess.Popen[bytes], str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
        )
        started.append(proc)
        assert proc.stdout is not None
        return proc, proc.stdout.readline().decode().strip()

    yield run
    for proc in started:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_a_process_that_exits_on_sigterm_is_not_killed(start: Start) -> None:
    proc, line = start(SLEEPS)
    assert line == "ready" and group_alive(proc.pid)
    began = time.monotonic()
    assert stop_group(proc, grace=20)
    assert proc.returncode == -signal.SIGTERM
    assert time.monotonic() - began < 10  # it did not wait out the grace
    assert not group_alive(proc.pid)


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(
    start: Start,
) -> None:
    proc, line = start(IGNORES_TERM)
    assert line == "ready"
    began = time.monotonic()
    assert stop_group(proc, grace=0.5)
    assert proc.returncode == -signal.SIGKILL
    assert time.monotonic() - began >= 0.5
    assert not group_alive(proc.pid)


def test_a_grandchild_that_outlives_its_parent_is_killed_with_the_group(
    start: Start,
) -> None:
    proc, grandchild = start(_with_child(IGNORES_TERM))
    assert grandchild.isdigit()
    assert stop_group(proc, grace=1)
    assert proc.returncode == -signal.SIGTERM  # the leader went at once; its child did not
    assert not group_alive(proc.pid)
    assert not signal_group(proc.pid, 0)


def test_leader_only_leaves_the_children_to_the_leader(start: Start) -> None:
    proc, _ = start(_with_child(SLEEPS, FORWARDS_TERM))
    assert stop_group(proc, grace=20, leader_only=True)
    assert proc.returncode == 0  # the leader saw its child end by its SIGTERM: no SIGKILL
    assert not group_alive(proc.pid)


def test_leader_only_still_kills_what_the_leader_leaves_behind(
    start: Start,
) -> None:
    proc, _ = start(_with_child(IGNORES_TERM))
    assert stop_group(proc, grace=1, leader_only=True)
    assert proc.returncode == -signal.SIGTERM
    assert not group_alive(proc.pid)


def test_group_gone_waits_at_most_its_timeout(start: Start) -> None:
    proc, _ = start(_with_child(SLEEPS))
    began = time.monotonic()
    assert not group_gone(proc.pid, timeout=0.3)
    assert 0.3 <= time.monotonic() - began < 5
    assert kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    assert group_gone(proc.pid, timeout=0)
