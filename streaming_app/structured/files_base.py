"""A files base of the structured engine: every total, written by the executors.

Driver side plans, executors read and write. The cheap way, when this query's output
reaches the micro-batch before: its newest base and the deltas after it (the chain, found
from the names and markers only, `chain_dirs`) are read as text by the executors, the
micro-batch's changed totals laid over them, the newest line of each key kept. Otherwise
(the chain starts, broke, or was removed), or when a snapshot reads every total in the same
micro-batch: every total (totals.py `EveryTotal`, the state of the micro-batch before read
with Spark's state data source, the changes laid over it), read once for both. (Every total
read back from the chain instead cost as much in the app: 3.5-3.8 s a micro-batch against
2.7-3.5 s, docs/benchmarks-history.md.) Either way
the lines, made by Spark itself (totals.py `total_lines`), go straight to part files on
any Hadoop file system, and no total passes through the driver or Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streaming_app.common.fs import FileSystem, join
from streaming_app.sinks.files_layout import (
    CHAIN_MARKER,
    DELTA,
    SUCCESS_MARKER,
    TOTALS,
    batch_of,
    parse_link,
    totals_name,
)
from streaming_app.structured.totals import LINE, EveryTotal, total_lines

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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


def chained_lines(spark: SparkSession, dirs: list[str], changes: DataFrame) -> DataFrame:
    """Every total's line: the chain's lines with the changes' laid over, on the executors.

    Each key keeps its line of the latest directory (the changes come last); a key is
    what a line has before its last tab, as the files sink's readers take it."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    order = "order"
    # The directory, not a glob of its parts: Spark warns with a stack trace on a glob
    # (FileStreamSink.hasMetadata), and skips the markers, whose names start with `_`.
    parts = [
        spark.read.text(path).select(F.lit(i).alias(order), LINE) for i, path in enumerate(dirs)
    ]
    parts.append(total_lines(changes).select(F.lit(len(dirs)).alias(order), LINE))
    lines = parts[0]
    for part in parts[1:]:
        lines = lines.unionByName(part)
    key = F.regexp_extract(F.col(LINE), "(?s)^(.*)\t", 1)
    newest = lines.groupBy(key.alias("k")).agg(F.max_by(LINE, order).alias(LINE))
    return newest.select(LINE)


def chain_reader(
    fs: FileSystem,
    output_dir: str,
    context: str,
    previous_ms: int,
    spark: SparkSession,
    changes: Callable[[], DataFrame],
) -> Callable[[], DataFrame | None]:
    """Every total's line after a micro-batch (`chained_lines` of this context's chain up
    to `previous_ms` and the micro-batch's changed totals, checkpointed: `changes`, asked
    for only when the chain reaches it), or None where the chain does not reach it; the
    chain is looked up once however often the reader is called."""
    found: list[list[str] | None] = []

    def lines() -> DataFrame | None:
        if not found:
            found.append(chain_dirs(fs, output_dir, context, previous_ms))
        dirs = found[0]
        return None if dirs is None else chained_lines(spark, dirs, changes())

    return lines


def base_writer(
    chain: Callable[[], DataFrame | None], every: EveryTotal, read: bool
) -> Callable[[str], None]:
    """write_files' `write_base`: the chain and the changes (`chain_reader`), else every
    total of the state.

    read: every total is read this micro-batch anyway (for a snapshot): the base is
    written from it.
    """

    def write_base(temp: str) -> None:
        lines = None if read else chain()
        if lines is None:
            total_lines(every.frame()).write.text(temp)
        else:
            lines.write.text(temp)

    return write_base
