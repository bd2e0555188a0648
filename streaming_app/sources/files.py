"""Files source (DStream): lines of files moved into a directory, replayable and exact.

Driver side: `directory_lines` builds the stream; `track_files` runs once per batch on the
driver (a transform), logs which files the batch reads and drops files already counted in
a restored snapshot. Executors only read the files' lines (Spark's own textFileStream).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.streaming import DStream, StreamingContext

from streaming_app.common.batch_time import epoch_ms
from streaming_app.common.hadoop_fs import HadoopFs
from streaming_app.sources.files_log import (
    PRESENT_AT_START,
    InputFilesLog,
    base_name,
    visible_names,
)
from streaming_app.sources.late_files import (
    SnapshotFiles,
    forget,
    note_read,
    remember_ms,
    renew_late_files,
)
from streaming_app.sources.line_counts import counted

if TYPE_CHECKING:
    from pyspark import RDD

log = logging.getLogger(__name__)


def directory_lines(
    ssc: StreamingContext,
    input_dir: str,
    checkpoint_dir: str,
    seeded: frozenset[str],
    batch_ms: int,
    snapshot_files: SnapshotFiles | None = None,
) -> DStream[str]:
    """Lines of the files that appear in a directory: replayable, exact across crashes.

    Which files each batch read goes to `input-files/` under the checkpoint (snapshots
    record it); files counted into a restored context's seed are not read again. A file
    moved in with a modification time before the stream's window is made new again
    (late_files.py; `snapshot_files`: the files the newest snapshot of this context
    includes, since the snapshot writer prunes the log).
    """
    fs = HadoopFs(ssc.sparkContext, checkpoint_dir)
    files_log = InputFilesLog(fs, checkpoint_dir)
    fs.delete(files_log.directory)  # a new context: entries of an earlier one do not apply
    forget(checkpoint_dir)
    existing = visible_names(HadoopFs(ssc.sparkContext, input_dir).list_names(input_dir))
    if existing and not seeded:
        log.warning(
            "source: %d file(s) already in %s are not read: only files moved in "
            "after the stream starts are counted",
            len(existing),
            input_dir,
        )
    # Files present now are either ignored by the stream or counted in the seed: either
    # way a later snapshot must not take them for new ones.
    files_log.write_files(int(time.time() * 1000), existing, note=PRESENT_AT_START)
    log.info("source: files in %s (exactly-once across driver crashes)", input_dir)
    window_ms = remember_ms(ssc.sparkContext.getConf(), batch_ms)
    tracking = FilesTracking(checkpoint_dir, seeded, input_dir, window_ms, snapshot_files)
    return ssc.textFileStream(input_dir).transform(lambda t, rdd: track_files(t, rdd, tracking))


def rdd_input_paths(rdd: RDD[Any]) -> list[str]:
    """Paths of the files a batch RDD of textFileStream reads, from its JVM lineage.

    FileInputDStream makes one Hadoop RDD per file, named after the file's path, and
    unions them; walking the dependencies finds them without reading any data.
    """
    paths: list[str] = []
    stack = [rdd._jrdd.rdd()]
    while stack:
        node = stack.pop()
        if node.getClass().getSimpleName() == "NewHadoopRDD":
            paths.append(str(node.name()))
            continue
        deps = node.dependencies()
        stack.extend(deps.apply(i).rdd() for i in range(deps.size()))
    return paths


@dataclass(frozen=True)
class FilesTracking:
    """What the files source's transform captures into the checkpoint."""

    checkpoint_dir: str
    # Files counted into a restored context's initial state: never read again.
    seeded: frozenset[str] = frozenset()
    # The watched directory and the file stream's remember window (late_files.py); a
    # checkpoint of a release before them has neither.
    input_dir: str | None = None
    window_ms: int = 0
    snapshot_files: SnapshotFiles | None = None


def track_files(batch_time: datetime, rdd: RDD[str], tracking: FilesTracking) -> RDD[str]:
    """Log the files a batch reads (driver side), drop those already in the seed, count lines;
    make new again the files moved in too late for the stream's window (late_files.py)."""
    batch_ms = epoch_ms(batch_time)
    lines = _read_files(batch_ms, rdd, tracking)
    if tracking.input_dir is not None:
        renew_late_files(
            rdd.context, batch_ms, tracking.input_dir, tracking.checkpoint_dir, tracking.window_ms,
            tracking.seeded, tracking.snapshot_files,
        )  # fmt: skip
    return counted(lines, batch_ms)


def _read_files(batch_ms: int, rdd: RDD[str], tracking: FilesTracking) -> RDD[str]:
    paths = rdd_input_paths(rdd)
    if not paths:
        return rdd
    files = InputFilesLog(HadoopFs(rdd.context, tracking.checkpoint_dir), tracking.checkpoint_dir)
    names = [base_name(p) for p in paths]
    files.write_files(batch_ms, names)
    note_read(tracking.checkpoint_dir, names)
    kept = [p for p in paths if base_name(p) not in tracking.seeded]
    if len(kept) == len(paths):
        return rdd
    log.info(
        "batch_time_ms=%d: %d file(s) already counted in the restored snapshot are not read again",
        batch_ms,
        len(paths) - len(kept),
    )
    sc = rdd.context
    if not kept:
        return sc.emptyRDD()
    return sc.union([sc.textFile(p) for p in kept])
