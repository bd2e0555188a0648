"""Files moved in with a modification time before the file stream's window: made new again.

Driver side, once per batch (files.track_files). Spark's file stream selects a file only
while its modification time lies in the batch's remember window
(`spark.streaming.fileStream.minRememberDuration`, 60 s, rounded up to whole batches);
`mv` keeps the time a file was written, so a file written earlier and moved in later was
skipped without a word. Such a file, if the input-files log shows it was never read,
gets its modification time set to now, with a warning that names it: the stream selects
it in a coming batch, through its own bookkeeping, as if it had just been written.

Never read twice: a file the stream reads is in the log of the batch that read it
(written before the batch's output), or, once the snapshot writer pruned that entry, in
the newest snapshot's list of files (`snapshot_files`); a file older than the window is
one the stream cannot select again. Where neither tells (the log pruned by `checkpoint
clean` or by snapshots since removed), a file whose modification time is before the
oldest entry kept may have been read: it is left alone.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from streaming_app.common.fs import join, local_path
from streaming_app.common.hadoop_fs import HadoopFs
from streaming_app.common.path_fs import filesystem_for
from streaming_app.sources.files_log import PRESENT_AT_START, InputFilesLog, visible_names

log = logging.getLogger(__name__)

MIN_REMEMBER = "spark.streaming.fileStream.minRememberDuration"
LEGACY_MIN_REMEMBER = "spark.streaming.minRememberDuration"


_UNITS_S = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def _seconds(text: str) -> int:
    """A Spark time setting in whole seconds (`60s`, `2min`, `90` = seconds), as Spark
    reads minRememberDuration."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if match is None or match[2] not in ("", *_UNITS_S):
        raise ValueError(f"not a time: {text!r}")
    return int(int(match[1]) * _UNITS_S.get(match[2], 1))


def remember_ms(conf: Any, batch_ms: int) -> int:
    """The file stream's remember window: FileInputDStream's durationToRemember.

    `conf` is the SparkConf; like Spark, whole seconds, rounded up to whole batches.
    """
    seconds = _seconds(conf.get(MIN_REMEMBER, conf.get(LEGACY_MIN_REMEMBER, "60s")))
    return batch_ms * math.ceil(seconds * 1000 / batch_ms)


@dataclass
class _Known:
    """The names the input-files log holds (read once per driver process), and its horizon."""

    names: set[str]
    # Files modified at or before it may have been read in entries pruned since.
    horizon_ms: int | None
    warned: set[str] = field(default_factory=set)


_KNOWN: dict[str, _Known] = {}


# The input files the newest snapshot of this context includes, None without one.
SnapshotFiles = Callable[[], "frozenset[str] | None"]


def _known(checkpoint_dir: str, snapshot_files: SnapshotFiles | None) -> _Known:
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
        in_snapshot = snapshot_files() if snapshot_files is not None else None
        if in_snapshot is not None:
            names |= in_snapshot
            horizon = None  # the snapshot's list covers the entries pruned before it
        known = _KNOWN[checkpoint_dir] = _Known(names, horizon)
        log.info(
            "source: %d file(s) read or present at the start (input-files log%s)%s",
            len(names),
            "" if in_snapshot is None else " and the newest snapshot",
            "" if horizon is None else f"; the log starts at batch_time_ms={horizon}",
        )
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
    if local is None:
        times = HadoopFs(sc, directory).modification_times(directory)
    else:
        with os.scandir(local) as entries:
            times = {e.name: e.stat().st_mtime_ns // 1_000_000 for e in entries if e.is_file()}
    return {name: times[name] for name in visible_names(times)}


def _touch(sc: Any, directory: str, name: str, now_ms: int) -> None:
    local = local_path(directory)
    if local is None:
        HadoopFs(sc, directory).set_modification_time(join(directory, name), now_ms)
    else:
        os.utime(os.path.join(local, name), ns=(now_ms * 1_000_000, now_ms * 1_000_000))


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
    snapshot_files: SnapshotFiles | None = None,
) -> list[str]:
    """Set the modification time of the late files to now, naming each; returns them."""
    known = _known(checkpoint_dir, snapshot_files)
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
