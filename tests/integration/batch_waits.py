"""Waits on batches instead of sleeps: one planned, a kill that lands mid-batch, more completed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.harness import SCHEDULING_DELAY, App


def batch_ids(checkpoint: Path, log: str) -> set[int]:
    """The entries of the offsets or commits log by name: batch times (DStreams) or
    micro-batch ids (Structured Streaming); a temp file of a write in progress is not one."""
    directory = checkpoint / log
    if not directory.is_dir():
        return set()
    return {int(name) for name in os.listdir(directory) if name.isdigit()}


def wait_planned(checkpoint: Path, known: set[int], app: App, timeout: float = 180) -> int:
    """The first batch in the offset log that is not in `known`, polled every 2 ms (a kill
    right after must land before the batch commits); fails if the app ends first."""
    offsets = checkpoint / "offsets"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if offsets.is_dir():
            new = [int(n) for n in os.listdir(offsets) if n.isdigit() and int(n) not in known]
            if new:
                return min(new)
        assert app.proc.poll() is None, "the app ended:\n" + app.log()[-3000:]
        time.sleep(0.002)
    raise AssertionError(f"no batch was planned within {timeout} s:\n" + app.log()[-3000:])


def kill_mid_batch(
    app: App, checkpoint: Path, add_input: Callable[[], None], tries: int = 3
) -> int:
    """Add input, wait for the batch that plans it and kill -9 the app before that batch
    commits; returns the batch (its time or micro-batch id). A batch that committed before
    the kill could be sent is tried again with more input; a kill that lands after the
    commit fails the test: it was not mid-batch."""
    for _ in range(tries):
        known = batch_ids(checkpoint, "offsets")
        add_input()
        batch = wait_planned(checkpoint, known, app)
        if batch in batch_ids(checkpoint, "commits"):
            continue  # done before the kill could be sent: again
        app.kill9()
        assert batch not in batch_ids(checkpoint, "commits"), (
            f"the kill landed after batch {batch} committed, not mid-batch"
        )
        return batch
    raise AssertionError(
        f"each of {tries} batches committed before a kill could land mid-batch:\n"
        + app.log()[-3000:]
    )


def wait_more_batches(app: App, n: int = 3, timeout: float = 120) -> None:
    """Wait until a DStream app has completed `n` more batches (progress lines) than now:
    the batches in which a double count would show, counted instead of slept for."""
    start = len(SCHEDULING_DELAY.findall(app.log()))
    deadline = time.monotonic() + timeout
    while len(SCHEDULING_DELAY.findall(app.log())) < start + n:
        assert app.proc.poll() is None, "the app ended:\n" + app.log()[-3000:]
        assert time.monotonic() < deadline, f"no {n} more batches within {timeout} s"
        time.sleep(0.2)
