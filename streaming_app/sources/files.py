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
from streaming_app.sources.files_log import InputFilesLog, base_name, visible_names
from streaming_app.sources.line_counts import counted

if TYPE_CHECKING:
    from pyspark import RDD

log = logging.getLogger(__name__)


def directory_lines(
    ssc: StreamingContext, input_dir: str, checkpoint_dir: str, seeded: frozenset[str]
) -> DStream[str]:
    """Lines of the files that appear in a directory: replayable, exact across crashes.

    Which files each batch read goes to `input-files/` under the checkpoint (snapshots
    record it); files counted into a restored context's seed are not read again.
    """
    fs = HadoopFs(ssc.sparkContext, checkpoint_dir)
    files_log = InputFilesLog(fs, checkpoint_dir)
    fs.delete(files_log.directory)  # a new context: entries of an earlier one do not apply
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
    files_log.write_files(int(time.time() * 1000), existing, note="present-at-start")
    log.info("source: files in %s (exactly-once across driver crashes)", input_dir)
    tracking = FilesTracking(checkpoint_dir, seeded)
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


def track_files(batch_time: datetime, rdd: RDD[str], tracking: FilesTracking) -> RDD[str]:
    """Log the files a batch reads (driver side), drop those already in the seed, count lines."""
    batch_ms = epoch_ms(batch_time)
    return counted(_read_files(batch_ms, rdd, tracking), batch_ms)


def _read_files(batch_ms: int, rdd: RDD[str], tracking: FilesTracking) -> RDD[str]:
    paths = rdd_input_paths(rdd)
    if not paths:
        return rdd
    files = InputFilesLog(HadoopFs(rdd.context, tracking.checkpoint_dir), tracking.checkpoint_dir)
    files.write_files(batch_ms, (base_name(p) for p in paths))
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
