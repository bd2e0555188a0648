"""A DStream kill -9 that lands where a replay must read a batch's files again: right after
the output of a batch that read one, before a later checkpoint left that batch out."""

from __future__ import annotations

import re
import time
from pathlib import Path

from streaming_app.common.fs import LocalFs
from streaming_app.sources.files_log import InputFilesLog
from tests.integration.harness import App

# The files sink's debug line once a batch's base or delta is in place (sinks/files.py).
WROTE = r"wrote (base|delta) batch_time_ms={}\b"
RECOVERED_AT = r"Recovered streaming context .* at batch_time_ms=(\d+)"


def logged_files(checkpoint: Path, batch_ms: int) -> list[str]:
    """The input files the files source logged for a batch (`input-files/<batch_ms>`)."""
    record = InputFilesLog(LocalFs(), str(checkpoint)).read(batch_ms) or {}
    return [str(name) for name in record.get("files", [])]


def kill_after_writing(app: App, batch_ms: int, timeout: float = 120) -> None:
    """kill -9 the app as soon as it logs that batch `batch_ms`'s output is written (the
    log polled every 5 ms: before the next batch's checkpoint, as a rule). Needs
    `--log-level debug`."""
    written = re.compile(WROTE.format(batch_ms))
    deadline = time.monotonic() + timeout
    while not written.search(app.log()):
        assert app.proc.poll() is None, "the app ended:\n" + app.log()[-3000:]
        assert time.monotonic() < deadline, (
            f"batch_time_ms={batch_ms} not written within {timeout} s:\n" + app.log()[-3000:]
        )
        time.sleep(0.005)
    app.kill9()


def wait_replayed(app: App, batch_ms: int, timeout: float = 150) -> bool:
    """After a restart: whether the recovered run wrote batch `batch_ms` again. Spark
    replays the batches pending in its newest checkpoint and every interval from that
    checkpoint's own batch on, oldest first, so once both the recovered batch and
    `batch_ms` are due, one wait for the later of the two tells."""
    recovered = int(app.wait_for_log(RECOVERED_AT, timeout)[1])
    app.wait_for_log(WROTE.format(max(recovered, batch_ms)), timeout)
    return re.search(WROTE.format(batch_ms), app.log()) is not None
