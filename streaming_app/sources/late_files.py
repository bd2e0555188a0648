"""Files moved in with a modification time before the file stream's window: made new again.

Driver side, once per batch (files.track_files). Spark's file stream selects a file only
while its modification time lies in the batch's remember window
(`spark.streaming.fileStream.minRememberDuration`, 60 s, rounded up to whole batches);
`mv` keeps the time a file was written, so a file written earlier and moved in later was
skipped without a word. Such a file, if the input-files log shows it was never read,
gets its modification time set to now, with a warning that names it: the stream selects
it in a coming batch, through its own bookkeeping, as if it had just been written.

Never read twice: a file the stream reads is in the log of the batch that read it
(written before the batch's output), and a file older than the window is one the stream
cannot select again. After `checkpoint clean` pruned the log, a file whose modification
time is before the oldest entry kept cannot be told from one read then: it is left alone.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from streaming_app.common.fs import local_path
from streaming_app.common.path_fs import filesystem_for
from streaming_app.sources.files_log import PRESENT_AT_START, InputFilesLog, visible_names

log = logging.getLogger(__name__)

MIN_REMEMBER = "spark.streaming.fileStream.minRememberDuration"
LEGACY_MIN_REMEMBER = "spark.streaming.minRememberDuration"


def remember_ms(conf: Any, batch_ms: int) -> int:
    """The file stream's remember window: FileInputDStream's durationToRemember.

    `conf` is the JVM SparkConf; like Spark, whole seconds, rounded up to whole batches.
    """
    seconds = int(conf.getTimeAsSeconds(MIN_REMEMBER, conf.get(LEGACY_MIN_REMEMBER, "60s")))
    return batch_ms * math.ceil(seconds * 1000 / batch_ms)


@dataclass
class _Known:
    """The names the input-files log holds (read once per driver process), and its horizon."""

    names: set[str]
    # Files modified at or before it may have been read in entries pruned since.
    horizon_ms: int | None
    warned: set[str] = field(default_factory=set)


_KNOWN: dict[str, _Known] = {}


def _known(checkpoint_dir: str) -> _Known:
    known = _KNOWN.get(checkpoint_dir)
    if known is None:
        entries = InputFilesLog(filesystem_for(checkpoint_dir), checkpoint_dir)
        names: set[str] = set()
        horizon: int | None = None
        for index, batch_ms in enumerate(entries.batch_times()):
            record = entries.read(batch_ms) or {}
            if index == 0 and record.get("note") != PRESENT_AT_START:
                horizon = batch_ms  # the log starts later than its context: pruned
            names.update(str(n) for n in record.get("files", []))
        known = _KNOWN[checkpoint_dir] = _Known(names, horizon)
    return known


def forget(checkpoint_dir: str) -> None:
    """A new context: its log starts afresh."""
    _KNOWN.pop(checkpoint_dir, None)


def note_read(checkpoint_dir: str, names: Iterable[str]) -> None:
    """Names a batch read (just logged): known from now on, if the log was read already."""
    known = _KNOWN.get(checkpoint_dir)
    if known is not None:
        known.names.update(names)


def modification_times(sc: Any, directory: str) -> dict[str, int]:
    """Each visible file's modification time in epoch ms (local disk, or Hadoop's listing)."""
    local = local_path(directory)
    times: dict[str, int] = {}
    if local is not None:
        with os.scandir(local) as entries:
            for entry in entries:
                if entry.is_file():
                    times[entry.name] = entry.stat().st_mtime_ns // 1_000_000
    else:
        path = sc._jvm.org.apache.hadoop.fs.Path(directory)
        fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
        for status in fs.listStatus(path):
            if status.isFile():
                times[str(status.getPath().getName())] = int(status.getModificationTime())
    return {name: times[name] for name in visible_names(times)}


def _touch(sc: Any, directory: str, name: str, now_ms: int) -> None:
    local = local_path(directory)
    if local is not None:
        os.utime(os.path.join(local, name), ns=(now_ms * 1_000_000, now_ms * 1_000_000))
        return
    jvm = sc._jvm
    path = jvm.org.apache.hadoop.fs.Path(directory.rstrip("/") + "/" + name)
    path.getFileSystem(sc._jsc.hadoopConfiguration()).setTimes(path, now_ms, -1)


def late_files(
    times: dict[str, int], known: set[str], seeded: frozenset[str], before_ms: int, horizon: int
) -> list[str]:
    """Files never read whose modification time is at or before `before_ms` (the window's
    start) and after `horizon` (the log's): the stream will not select them."""
    return sorted(
        name
        for name, mtime in times.items()
        if horizon < mtime <= before_ms and name not in known and name not in seeded
    )


def renew_late_files(
    sc: Any,
    batch_ms: int,
    input_dir: str,
    checkpoint_dir: str,
    window_ms: int,
    seeded: frozenset[str],
) -> list[str]:
    """Set the modification time of the late files to now, naming each; returns them."""
    known = _known(checkpoint_dir)
    horizon = known.horizon_ms if known.horizon_ms is not None else -1
    times = modification_times(sc, input_dir)
    late = late_files(times, known.names, seeded, batch_ms - window_ms, horizon)
    now_ms = int(time.time() * 1000)
    for name in late:
        _touch(sc, input_dir, name, now_ms)
        if name not in known.warned:
            known.warned.add(name)
            log.warning(
                "batch_time_ms=%d: source: %s in %s was moved in with a modification time of "
                "%s, before the file stream's %d s window (mv keeps the time a file was "
                "written; cp makes a new one): its modification time is set to now, so that "
                "a coming batch counts it",
                batch_ms,
                name,
                input_dir,
                datetime.fromtimestamp(times[name] / 1000, timezone.utc).isoformat(),
                window_ms // 1000,
            )
    return late
