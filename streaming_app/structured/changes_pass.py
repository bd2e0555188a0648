"""One pass over a micro-batch's changed totals: their count, the top N and the files delta.

Driver side plans, executors do the work (`pass_partition`, once per partition of the
changed totals, in `mapInArrow`: the micro-batch's own frame, so that the micro-batch and
the pass are one job, unless other readers made a copy, changes.py). Each task counts its
partition's totals, ranks
its top N (highest total, then key) and, when a delta is written to a local directory,
writes the partition's lines (Spark's own `total_lines`, the format of every other output
of the files sink) to its part file itself, under a temporary name it renames when
complete (sinks/parts.py `write_part`: a retried task replaces what another attempt
left). The driver receives one row a partition: the count and the top N. One Spark job a
micro-batch instead of three (a count, a ranking, Spark's text writer with Hadoop's
output committer): 0.10-0.14 s against 0.26-0.34 s for 67,000 totals on two cores
(docs/benchmarks-history.md). A delta on another Hadoop file system (HDFS, S3) is written
by Spark's text writer beside the pass, as before.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import join
from streaming_app.lifecycle.worker_daemon import freeze_once
from streaming_app.sinks.files_layout import SUCCESS_MARKER
from streaming_app.sinks.parts import write_part
from streaming_app.structured.state_layout import KEY, PRECISION, TOTAL, exact
from streaming_app.structured.totals import LINE, total_line, total_lines

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streaming_app.common.hadoop_fs import HadoopFs
    from streaming_app.structured.changes import Changes

COUNT, TOP_KEYS, TOP_TOTALS = "count", "top_keys", "top_totals"


@dataclass(frozen=True)
class Passed:
    """What the pass found: how many totals changed, and the top N of them."""

    changed: int
    top: list[tuple[str, Any]]


def ranked(candidates: Iterable[tuple[str, Any]], n: int) -> list[tuple[str, Any]]:
    """The `n` first (key, total) by rank: highest total, then key."""
    return heapq.nsmallest(n, candidates, key=lambda pair: (-pair[1], pair[0]))


def pass_partition(
    batches: Iterable[Any], n: int, directory: str | None, scale: int | None
) -> Iterator[Any]:
    """mapInArrow function: one partition's (key, total, line) batches counted, ranked and,
    with a directory (local), written as its part file; yields one row (count, top keys,
    top totals). scale: the totals' decimal scale, None for bigint totals."""
    import pyarrow as pa
    from pyspark import TaskContext

    freeze_once()
    best: list[tuple[str, Any]] = []
    seen = 0

    def lines() -> Iterator[str]:
        nonlocal best, seen
        for batch in batches:
            seen += batch.num_rows
            if n > 0:
                pairs = zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)
                best = ranked([*best, *pairs], n)
            if directory is not None:
                yield from batch.column(2).to_pylist()

    if directory is None:
        for _ in lines():
            pass
    else:
        context = TaskContext.get()
        assert context is not None
        for _ in write_part(directory, context.partitionId(), lines()):
            pass
    total_type = pa.int64() if scale is None else pa.decimal128(PRECISION, scale)
    yield pa.RecordBatch.from_arrays(
        [
            pa.array([seen], pa.int64()),
            pa.array([[key for key, _ in best]], pa.list_(pa.string())),
            pa.array([[total for _, total in best]], pa.list_(total_type)),
        ],
        [COUNT, TOP_KEYS, TOP_TOTALS],
    )


def run_pass(changes: DataFrame, n: int, directory: str | None) -> Passed:
    """Count, rank and (with `directory`, a new local directory) write the micro-batch's
    changed totals as part files in one job; the driver gets a row a partition."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    total_type = changes.schema[TOTAL].dataType
    scale = getattr(total_type, "scale", None)  # a DecimalType's; bigint totals have none
    schema = (
        f"{COUNT} bigint, {TOP_KEYS} array<string>, {TOP_TOTALS} array<{total_type.simpleString()}>"
    )
    columns = changes.select(F.col(KEY), F.col(TOTAL), total_line().alias(LINE))
    function = partial(pass_partition, n=n, directory=directory, scale=scale)
    rows = columns.mapInArrow(function, schema)
    found = rows.collect()
    candidates = [
        (key, exact(total))
        for row in found
        for key, total in zip(row[TOP_KEYS], row[TOP_TOTALS], strict=True)
    ]
    return Passed(sum(row[COUNT] for row in found), ranked(candidates, n) if n > 0 else [])


class ChangesPass:
    """The pass of one micro-batch, run once: inside the files sink's delta when it writes
    one (`write_delta`), else when the count or the top N is asked for (`result`). It
    reads the changed totals last (changes.py `once`): without a copy of them, the
    micro-batch itself runs in the pass's job."""

    def __init__(self, changes: Changes, n: int) -> None:
        self.changes = changes
        self.n = n
        self._passed: Passed | None = None

    def write_delta(self, fs: HadoopFs, directory: str) -> None:
        """write_files' `write_delta`: the changed totals as part files and `_SUCCESS` in
        `directory` (new), by the executors."""
        local = fs.local_path(directory)
        if local is None:  # HDFS, S3: Spark's writer, whose committer writes _SUCCESS
            total_lines(self.changes.checkpointed()).write.text(directory)
            return
        fs.mkdirs(directory)
        self._passed = run_pass(self.changes.once(), self.n, local)
        fs.write_atomic(join(directory, SUCCESS_MARKER), b"")

    def result(self) -> Passed:
        """The count and the top N (the pass run now if no delta ran it; with no top N to
        rank and a copy of the changed totals, Spark's own count of its blocks, which no
        Python worker runs)."""
        if self._passed is None:
            if self.n > 0 or not self.changes.copied:
                self._passed = run_pass(self.changes.once(), self.n, None)
            else:
                self._passed = Passed(self.changes.checkpointed().count(), [])
        return self._passed
