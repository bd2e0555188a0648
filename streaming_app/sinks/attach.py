"""Outputs of the running totals: the console line per batch and idempotent files."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from streaming_app.sinks.files_layout import (
    SUCCESS_MARKER,
    TOTALS,
    format_total,
    format_value,
    temp_name,
    to_prune,
    totals_name,
)

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.streaming import DStream

    from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)

# Sinks that have written each batch in this driver process: {batch_ms: {sink, ...}}.
# The Kafka commit (the last output operation) commits a batch only if all are there,
# because Spark runs a batch's later output operations even when an earlier one failed.
_written: dict[int, set[str]] = {}


def mark_written(batch_ms: int, sink: str) -> None:
    """Record that `sink` has written batch `batch_ms`."""
    _written.setdefault(batch_ms, set()).add(sink)


def take_written(batch_ms: int) -> set[str]:
    """The sinks that wrote batch `batch_ms`; forgets it and every older batch."""
    done = _written.pop(batch_ms, set())
    for stale in [t for t in _written if t < batch_ms]:
        del _written[stale]
    return done


def epoch_ms(batch_time: datetime) -> int:
    """Epoch milliseconds (UTC) of a batch time, which PySpark hands over as naive local time."""
    return round(batch_time.timestamp() * 1000)


def _by_count(pair: tuple[str, int]) -> tuple[int, str]:
    return -pair[1], pair[0]


def _shown(top: list[tuple[str, Any]]) -> str:
    if not any(isinstance(v, Decimal) for _, v in top):
        return str(top)
    return "[" + ", ".join(f"({k!r}, {format_value(v)})" for k, v in top) + "]"


def console_line(batch_time: datetime, top: list[tuple[str, Any]], label: str = "Counts") -> str:
    """The seed-familiar line: `Counts at time 2026-11-22 10:00:01 [('a', 3), ('b', 1)]`."""
    return f"{label} at time {batch_time:%Y-%m-%d %H:%M:%S} {_shown(top)}"


def print_top(
    batch_time: datetime, rdd: RDD[tuple[str, Any]], top_n: int, label: str = "Counts"
) -> None:
    """Print the RDD's top keys by value to stdout, as one console line."""
    top = rdd.takeOrdered(top_n, key=_by_count)
    sys.stdout.write(console_line(batch_time, top, label) + "\n")
    sys.stdout.flush()


def write_console(batch_time: datetime, rdd: RDD[tuple[str, int]], top_n: int) -> None:
    """Console sink: print the batch's top words by total to stdout."""
    print_top(batch_time, rdd, top_n)
    mark_written(epoch_ms(batch_time), "console")


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def write_output_dir(
    batch_time: datetime,
    rdd: RDD[tuple[str, Any]],
    output_dir: str,
    keep: int,
    kind: str,
    collect: bool = False,
) -> int:
    """Write the RDD as `<kind>-<batch_ms>/` under output_dir, atomically; returns batch_ms.

    A batch replayed after recovery has the same content, so it writes the same again
    under the same name: the output is idempotent per batch time. With `collect` the
    driver writes one part file itself (for small outputs: no Hadoop output job).
    """
    from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

    batch_ms = epoch_ms(batch_time)
    fs = HadoopFs(rdd.context, output_dir)
    temp = _join(output_dir, temp_name(batch_ms, kind))
    final = _join(output_dir, totals_name(batch_ms, kind))
    fs.delete(temp)  # left over from a run killed while writing this batch
    if collect:
        body = "".join(format_total(pair) + "\n" for pair in rdd.collect())
        fs.mkdirs(temp)
        fs.write_atomic(_join(temp, "part-00000"), body.encode("utf-8"))
        fs.write_atomic(_join(temp, SUCCESS_MARKER), b"")
    else:
        rdd.map(format_total).saveAsTextFile(temp)
    # A replay of a batch that completed before the crash writes the same content again.
    fs.publish_dir(temp, final)
    for name in to_prune(fs.list_names(output_dir), keep, batch_ms, kind):
        fs.delete(_join(output_dir, name))
    log.debug("wrote %s batch_time_ms=%d path=%s", kind, batch_ms, final)
    return batch_ms


def write_totals(
    batch_time: datetime, rdd: RDD[tuple[str, int]], output_dir: str, keep: int
) -> None:
    """Files sink: write all totals as of this batch to `totals-<batch_ms>/`, atomically."""
    mark_written(write_output_dir(batch_time, rdd, output_dir, keep, TOTALS), "files")


def attach_sinks(
    state: DStream[Any],
    totals_of: Callable[[RDD[Any]], RDD[tuple[str, int]]],
    counts: DStream[tuple[str, int]],
    config: AppConfig,
    context_id: str,
) -> None:
    """Attach the configured sinks to the state, as output operations.

    totals_of: an RDD of the state as (key, total) pairs, applied in each sink's own job.
    """
    # The lambdas capture only plain values, frozen settings and module functions, so
    # they pickle into the checkpoint.
    sinks, top_n, output_dir, keep = (
        config.sinks,
        config.top_n,
        config.output_dir,
        config.output_keep,
    )
    if "files" in sinks:
        assert output_dir is not None
        state.foreachRDD(lambda t, rdd: write_totals(t, totals_of(rdd), output_dir, keep))
    if "console" in sinks:
        state.foreachRDD(lambda t, rdd: write_console(t, totals_of(rdd), top_n))
    if "postgres" in sinks:
        from streaming_app.sinks.postgres.stream import PostgresTarget, with_changes, write_postgres

        target = PostgresTarget(
            config.postgres_table,
            config.source,
            config.checkpoint_dir,
            config.batch_ms,
            context_id,
            numeric=config.job == "keyed-sum",
        )
        changes = state.transformWith(
            lambda t, rdd, batch: with_changes(t, totals_of(rdd), batch), counts
        )
        changes.foreachRDD(lambda t, rdd: write_postgres(t, rdd, target))
