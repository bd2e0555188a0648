"""Waits on batches instead of sleeps: one planned, a kill that lands mid-batch, more completed,
all completed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from streaming_app.common.fs import LocalFs
from streaming_app.sinks.files_layout import DELTA, SUCCESS_MARKER, TOTALS, WINDOW, totals_name
from streaming_app.sources.files_log import INPUT_FILES_DIR
from streaming_app.structured.query_log import batch_timestamp, offsets_entry
from streaming_app.structured.source_log import files_up_to, log_offset
from tests.integration.harness import SCHEDULING_DELAY, App, wait_for


def batch_ids(checkpoint: Path, log: str) -> set[int]:
    """The entries of the offsets or commits log by name: batch times (DStreams) or
    micro-batch ids (Structured Streaming); a temp file of a write in progress is not one."""
    directory = checkpoint / log
    if not directory.is_dir():
        return set()
    return {int(name) for name in os.listdir(directory) if name.isdigit()}


class Batches(NamedTuple):
    """How a test sees an app's batches: those planned so far (batch times or micro-batch
    ids) and whether one has completed."""

    planned: Callable[[], set[int]]
    done: Callable[[int], bool]


def logged_batches(checkpoint: Path) -> Batches:
    """Batches with an offsets and a commits log (the structured engine; DStreams' Kafka
    source): planned once in `offsets/`, done once in `commits/`."""
    return Batches(
        lambda: batch_ids(checkpoint, "offsets"),
        lambda batch: batch in batch_ids(checkpoint, "commits"),
    )


def files_batches(checkpoint: Path, output_dir: Path) -> Batches:
    """The DStream files source's batches that read files: planned once their
    `input-files/` entry is written (when the batch is generated), done once the files
    sink's output of that batch time is complete."""

    def done(batch: int) -> bool:
        kinds = (TOTALS, DELTA, WINDOW)
        return any((output_dir / totals_name(batch, k) / SUCCESS_MARKER).exists() for k in kinds)

    return Batches(lambda: batch_ids(checkpoint, INPUT_FILES_DIR), done)


def micro_batch_that_read(checkpoint: Path, name: str) -> int | None:
    """The micro-batch of a structured files query (its checkpoint) that read input file
    `name`, None before one did: by the file source's `sources/0/` log and the offsets log."""
    fs, query = LocalFs(), str(checkpoint)
    for batch_id in sorted(batch_ids(checkpoint, "offsets")):
        entry = offsets_entry(fs, query, batch_id)
        position = log_offset(entry.sources[0]) if entry is not None else -1
        if position >= 0 and name in files_up_to(fs, query, position):
            return batch_id
    return None


def wait_window_past(
    checkpoint: Path,
    name: str,
    slide_ms: int,
    batch_ms: int,
    app: App | None = None,
    timeout: float = 180,
) -> None:
    """Wait until a structured files query (its checkpoint) has read file `name` and the
    clock is far enough past the end of the first window that holds it (windows every
    `slide_ms`) that the next micro-batch falls in a later window and closes it.

    The window query times a micro-batch as structured/windows.py does: its timestamp
    rounded down to the batch interval, less 1 ms. So a micro-batch started within
    `batch_ms` after a window's end is still timed inside that window (its watermark 1 ms
    short of closing it): the clock must reach the end plus one batch interval."""

    def read() -> tuple[int] | None:  # a tuple: micro-batch 0 is one
        batch_id = micro_batch_that_read(checkpoint, name)
        return None if batch_id is None else (batch_id,)

    [batch_id] = wait_for(f"the query reading {name}", read, timeout, app)
    stamp = batch_timestamp(LocalFs(), str(checkpoint), batch_id)
    assert stamp is not None
    timed = stamp // batch_ms * batch_ms - 1
    ends = (timed // slide_ms + 1) * slide_ms
    closes = ends + batch_ms
    wait_for(
        "the clock a batch past that window's end",
        lambda: time.time() * 1000 >= closes,
        30,
        app,
        0.05,
    )


def wait_planned(
    checkpoint: Path | Batches, known: set[int], app: App, timeout: float = 180
) -> int:
    """The first batch planned that is not in `known` (a checkpoint: in its offsets log),
    polled every 2 ms (a kill right after must land before the batch commits); fails if
    the app ends first."""
    batches = logged_batches(checkpoint) if isinstance(checkpoint, Path) else checkpoint

    def planned() -> set[int]:  # a set: batch 0 is one
        return batches.planned() - known

    return min(wait_for("a new batch planned", planned, timeout, app, 0.002))


def wait_batch_of(
    app: App, checkpoint: Path | Batches, add_input: Callable[[], None], timeout: float = 180
) -> int:
    """Add input, wait until the batch that plans it has completed, and return it: input
    spread over batches one by one, waited for instead of slept for."""
    batches = logged_batches(checkpoint) if isinstance(checkpoint, Path) else checkpoint
    known = batches.planned()
    add_input()
    batch = wait_planned(batches, known, app, timeout)
    wait_for(f"batch {batch} completed", lambda: batches.done(batch), timeout, app)
    return batch


def kill_mid_batch(
    app: App,
    checkpoint: Path | Batches,
    add_input: Callable[[], None],
    tries: int = 3,
    kill: Callable[[], None] | None = None,
) -> int:
    """Add input, wait for the batch that plans it and kill -9 the app (or call `kill`)
    before that batch completes; returns the batch (its time or micro-batch id). A batch
    that completed before the kill could be sent is tried again with more input; a kill
    that lands after it completed fails the test: it was not mid-batch. `checkpoint`: a
    checkpoint with offsets and commits logs, or the app's Batches."""
    batches = logged_batches(checkpoint) if isinstance(checkpoint, Path) else checkpoint
    for _ in range(tries):
        known = batches.planned()
        add_input()
        batch = wait_planned(batches, known, app)
        if batches.done(batch):
            continue  # done before the kill could be sent: again
        (kill or app.kill9)()
        assert not batches.done(batch), f"the kill landed after batch {batch} completed"
        return batch
    raise AssertionError(
        f"each of {tries} batches completed before a kill could land mid-batch:\n"
        + app.log()[-3000:]
    )


def wait_all_done(app: App, batches: Batches, timeout: float = 120) -> None:
    """Wait until every batch planned so far has completed: after a restart, the replayed
    one that a double count would show in (a structured query runs no batch without input,
    so there are no more batches to wait for)."""

    def all_done() -> bool:
        planned = batches.planned()
        return bool(planned) and batches.done(max(planned))

    wait_for("every planned batch completed", all_done, timeout, app)


def wait_more_batches(app: App, n: int = 3, timeout: float = 120) -> None:
    """Wait until a DStream app has completed `n` more batches (progress lines) than now:
    the batches in which a double count would show, counted instead of slept for."""
    start = len(SCHEDULING_DELAY.findall(app.log()))

    def done() -> bool:
        return len(SCHEDULING_DELAY.findall(app.log())) >= start + n

    wait_for(f"{n} more batches completed", done, timeout, app)
