"""The files source's position: which input files each batch read, logged under the checkpoint.

`input-files/<batch_ms>` lists the names of the files a batch of the directory source
read (names only: the source watches one flat directory). A snapshot folds these into
its manifest, so that a context restored from it knows which files its totals include.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import FileSystem, join
from streaming_app.sources.kafka.offset_log import BatchLog

if TYPE_CHECKING:
    from pyspark import RDD

log = logging.getLogger(__name__)

INPUT_FILES_DIR = "input-files"


class InputFilesLog(BatchLog):
    """`input-files/<batch_ms>`: the input files each batch read."""

    def __init__(self, fs: FileSystem, checkpoint_dir: str) -> None:
        super().__init__(fs, join(checkpoint_dir, INPUT_FILES_DIR))

    def write_files(self, batch_ms: int, names: Iterable[str], note: str = "read") -> None:
        """Log the files of a batch (`note`: read, or present-at-start, or seeded)."""
        self.write(batch_ms, {"files": sorted(set(names)), "note": note})

    def files_between(self, after_ms: int | None, until_ms: int) -> set[str]:
        """Every file logged for batches in (after_ms, until_ms]."""
        names: set[str] = set()
        for batch_ms in self.batch_times():
            if (after_ms is None or batch_ms > after_ms) and batch_ms <= until_ms:
                record = self.read(batch_ms) or {}
                names.update(str(n) for n in record.get("files", []))
        return names


def base_name(path: str) -> str:
    """The last component of a path or URI."""
    return path.rstrip("/").rpartition("/")[2]


def visible_names(names: Iterable[str]) -> list[str]:
    """Names the files source reads: FileInputDStream's default filter hides dot-files."""
    return [n for n in names if not n.startswith(".")]


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
    from streaming_app.sinks.attach import epoch_ms
    from streaming_app.sources.line_counts import counted

    batch_ms = epoch_ms(batch_time)
    return counted(_read_files(batch_ms, rdd, tracking), batch_ms)


def _read_files(batch_ms: int, rdd: RDD[str], tracking: FilesTracking) -> RDD[str]:
    from streaming_app.common.hadoop_fs import HadoopFs

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
