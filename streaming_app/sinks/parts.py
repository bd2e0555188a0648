"""Part files written by the executors: one per partition of an RDD of lines, then `_SUCCESS`.

Driver side plans and marks, executors write (`write_part`, once per partition). The
directory is a temporary one that the caller renames into place. On a local file system
(a path or `file:`, a shared mount on a cluster) each task writes its partition's lines
to `part-NNNNN` itself, under a name of its own that it renames when complete, so a retried
or speculative task replaces what another attempt left, and returns only its count. On
any other Hadoop file system (HDFS, S3) Spark's `saveAsTextFile` writes them: about
0.1-0.25 s more a batch on two cores (its output committer), measured side by side in
docs/benchmarks-history.md. Either way the driver receives a count per partition at most,
never a line, and writes `_SUCCESS` last.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING

from streaming_app.sinks.files_layout import SUCCESS_MARKER

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.common.hadoop_fs import HadoopFs


def part_name(index: int) -> str:
    """The name Hadoop's text output gives partition `index`'s file."""
    return f"part-{index:05d}"


def write_part(directory: str, index: int, lines: Iterable[str]) -> Iterator[int]:
    """Executor side: one partition's lines (each element ends with a newline) as its part
    file in a local directory; yields how many elements it wrote."""
    final = os.path.join(directory, part_name(index))
    temp = os.path.join(directory, f".{part_name(index)}.{uuid.uuid4().hex}.tmp")
    count = 0
    try:
        with open(temp, "w", encoding="utf-8", newline="") as out:
            for line in lines:
                out.write(line)
                out.write("\n")
                count += 1
        os.replace(temp, final)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    yield count


def write_parts(
    fs: HadoopFs,
    lines: RDD[str],
    directory: str,
    job: Callable[[Callable[[int, Iterable[str]], Iterator[int]]], None] | None = None,
) -> None:
    """Write `lines` as part files into `directory` (new), by the executors, then `_SUCCESS`.

    job: on a local file system, runs the writing job itself with the part writer it is
    given, one call a partition (StateView.writing: the same lines, and the batch's digest
    from the same tasks); None: a job of `lines`."""
    local = fs.local_path(directory)
    if local is None:
        lines.saveAsTextFile(directory)  # its committer writes _SUCCESS
        return
    fs.mkdirs(directory)
    write = partial(write_part, local)
    if job is None:
        lines.mapPartitionsWithIndex(write).collect()  # a count a task
    else:
        job(write)
    fs.write_atomic(directory.rstrip("/") + "/" + SUCCESS_MARKER, b"")
