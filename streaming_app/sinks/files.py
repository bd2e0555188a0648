"""Files sink: each batch's totals (or window) as `totals-<batch_ms>/`, written atomically.

Runs on the driver, as an output operation: it plans the write through Hadoop's
FileSystem, executors write the part files (`saveAsTextFile`), the driver publishes the
directory by renaming it and prunes old ones. A replayed batch writes the same again.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.sinks.commit import mark_written
from streaming_app.sinks.files_layout import (
    SUCCESS_MARKER,
    TOTALS,
    WINDOW,
    format_total,
    temp_name,
    to_prune,
    totals_name,
)

if TYPE_CHECKING:
    from pyspark import RDD


log = logging.getLogger(__name__)


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


def write_window_files(
    batch_time: datetime, rdd: RDD[tuple[str, Any]], output_dir: str, keep: int
) -> None:
    """Files sink: the whole window as `window-<batch_ms>/`, in the totals' layout.

    Written by the driver (one collect, one file) rather than by a Hadoop output job, which
    costs a second or more on two cores, every slide.
    """
    write_output_dir(batch_time, rdd, output_dir, keep, WINDOW, collect=True)
