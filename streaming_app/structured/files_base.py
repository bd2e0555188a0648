"""A files base of the structured engine: every total, written by the executors.

Driver side plans, executors read and write. The cheap way, when this query's output
reaches the micro-batch before: its newest base and the deltas after it (the chain, found
from the names and markers only, `chain_dirs`) are read as text by the executors, the
micro-batch's changed totals laid over them, the newest line of each key kept. Otherwise
(the chain starts, broke, or was removed), or when a snapshot reads every total in the same
micro-batch: every total (totals.py `EveryTotal`, the state of the micro-batch before read
with Spark's state data source, the changes laid over it), read once for both. Either way
the lines go straight to part files on any Hadoop file system, and no total passes
through the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from streaming_app.common.fs import FileSystem, join
from streaming_app.sinks.files_layout import (
    CHAIN_MARKER,
    DELTA,
    SUCCESS_MARKER,
    TOTALS,
    batch_of,
    format_total,
    parse_link,
    totals_name,
)
from streaming_app.structured.totals import EveryTotal, total_line

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext
    from pyspark.sql import DataFrame


def chain_dirs(fs: FileSystem, output_dir: str, context: str, previous_ms: int) -> list[str] | None:
    """The directories whose lines make every total as of `previous_ms`, oldest first:
    this context's newest base at or before it and each delta after it, each linked to
    the one before; None if the chain does not reach `previous_ms` unbroken."""
    names = fs.list_names(output_dir)
    bases = sorted(b for n in names if (b := batch_of(n, TOTALS)) is not None and b <= previous_ms)
    deltas = {b for n in names if (b := batch_of(n, DELTA)) is not None and b <= previous_ms}
    for base in reversed(bases):
        path = join(output_dir, totals_name(base, TOTALS))
        link = _link(fs, path)
        if link is None or link[0] != context:
            continue
        chain, reached = [path], base
        for delta in sorted(d for d in deltas if d > base):
            path = join(output_dir, totals_name(delta, DELTA))
            if _link(fs, path) != (context, reached):
                return None
            chain.append(path)
            reached = delta
        return chain if reached == previous_ms else None
    return None


def _link(fs: FileSystem, path: str) -> tuple[str, int] | None:
    """A complete output directory's (context, previous batch), None if incomplete."""
    if not fs.exists(join(path, SUCCESS_MARKER)):
        return None
    link = parse_link(fs.read_bytes(join(path, CHAIN_MARKER)))
    return None if link is None else (link.context, link.previous)


def tagged(order: int, line: str) -> tuple[str, tuple[int, str]]:
    """A `key<TAB>total` line as (key, (its directory's order, the line))."""
    return line.rpartition("\t")[0], (order, line)


def newer(a: tuple[int, str], b: tuple[int, str]) -> tuple[int, str]:
    """Of two lines of a key, the one of the later directory."""
    return a if a[0] >= b[0] else b


def line_of(item: tuple[str, tuple[int, str]]) -> str:
    """The kept line of a key."""
    return item[1][1]


def chained_lines(sc: SparkContext, dirs: list[str], changes: DataFrame) -> RDD[str]:
    """Every total's line: the chain's lines with the changes' laid over, on the executors."""
    parts = [
        sc.textFile(join(path, "part-*")).map(partial(tagged, i)) for i, path in enumerate(dirs)
    ]
    parts.append(changes.rdd.map(total_line).map(partial(tagged, len(dirs))))
    return sc.union(parts).reduceByKey(newer).map(line_of)


def base_writer(
    fs: FileSystem, output_dir: str, context: str, previous_ms: int, every: EveryTotal, read: bool
) -> Callable[[str], None]:
    """write_files' `write_base`: the chain and the changes, else every total of the state.

    read: every total is read this micro-batch anyway (for a snapshot): the base is
    written from it instead of the chain.
    """

    def write_base(temp: str) -> None:
        dirs = None if read else chain_dirs(fs, output_dir, context, previous_ms)
        if dirs is None:
            every.pairs().map(format_total).saveAsTextFile(temp)
        else:
            sc = every.spark.sparkContext
            chained_lines(sc, dirs, every.changes).saveAsTextFile(temp)

    return write_base
