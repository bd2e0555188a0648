"""Writing state snapshots from the running stream: an output operation on the totals.

Runs on the driver each due batch, which plans it: the executors write the part files
(one per state partition, sinks/parts.py: on a local file system by the tasks themselves,
on any other Hadoop file system by `saveAsTextFile`), the same tasks bring the batch's
digest (the count of keys and the sum of the totals), and the driver renames the
directory into place and writes the manifest last, through Hadoop's FileSystem, with the
source position from sources/positions.py. The totals never travel to the driver.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from streaming_app import __version__
from streaming_app.common.fs import FileSystem, join
from streaming_app.common.prometheus import timed
from streaming_app.recovery.snapshots import (
    MANIFEST,
    TEMP_PREFIX,
    Manifest,
    format_line,
    read_manifest,
    snapshot_batch,
    snapshot_name,
    snapshot_times,
    to_prune,
)
from streaming_app.sinks.parts import write_parts
from streaming_app.sources.files_log import InputFilesLog, visible_names
from streaming_app.sources.positions import batch_position, files_read_between

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.common.hadoop_fs import HadoopFs
    from streaming_app.state.view import StateView

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotSettings:
    """What the snapshot output operation captures into the checkpoint."""

    directory: str
    interval_ms: int
    keep: int
    source: str
    checkpoint_dir: str
    input_dir: str | None
    context_id: str  # the metadata app_id of the context whose snapshots may be chained


def is_due(batch_ms: int, settings: SnapshotSettings) -> bool:
    """Snapshots fall on multiples of the interval, so a replayed batch rewrites the same one."""
    return settings.keep > 0 and batch_ms % settings.interval_ms == 0


def write_snapshot(
    batch_time: datetime, rdd: RDD[Any], view: StateView, settings: SnapshotSettings
) -> None:
    """Write the totals of a due batch as a snapshot; a failure is a warning, not a crash."""
    from streaming_app.common.batch_time import epoch_ms

    batch_ms = epoch_ms(batch_time)
    if not is_due(batch_ms, settings):
        return
    try:
        with timed("snapshot"):
            path = _write(batch_ms, rdd, view, settings)
        if path is None:
            return
    except Exception as exc:  # the checkpoint still protects the state; retried next time
        warn_failed(f"batch_time_ms={batch_ms}", settings.directory, exc, settings.interval_ms)
        return
    log.info("wrote state snapshot batch_time_ms=%d path=%s", batch_ms, path)


def new_manifest(
    settings: SnapshotSettings,
    batch_ms: int,
    words: int,
    total: Any,
    position: dict[str, Any],
    engine: str = "dstream",
) -> Manifest:
    """The manifest of a snapshot written now (either engine's)."""
    return Manifest(
        batch_time_ms=batch_ms,
        source=settings.source,
        created_at_ms=int(time.time() * 1000),
        app_version=__version__,
        words=words,
        # An exact sum stays exact in JSON: a string.
        total=format(total, "f") if isinstance(total, Decimal) else total,
        position=position,
        context_id=settings.context_id,
        engine=engine,
    )


def warn_failed(batch: str, directory: str, exc: Exception, interval_ms: int) -> None:
    """The warning for a snapshot that could not be written (either engine's)."""
    log.warning(
        "%s: could not write the state snapshot to %s (%s); the next one is due in %g s",
        batch,
        directory,
        str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        interval_ms / 1000,
    )


def _write(batch_ms: int, rdd: RDD[Any], view: StateView, settings: SnapshotSettings) -> str | None:
    from streaming_app.common.hadoop_fs import HadoopFs

    fs = HadoopFs(rdd.context, settings.directory)
    times = snapshot_times(fs, settings.directory)
    if needless(fs, times, batch_ms, settings):
        return None
    log_fs = HadoopFs(rdd.context, settings.checkpoint_dir)
    position = _position(rdd, batch_ms, settings, fs, log_fs, times)
    temp = join(settings.directory, f"{TEMP_PREFIX}{batch_ms}")
    final = join(settings.directory, snapshot_name(batch_ms))
    fs.delete(temp)  # left over from a run killed while writing this snapshot
    # The executors write the state's partitions; the driver gets the counts only.
    lines = view.lines(rdd, format_line)
    write_parts(fs, lines, temp, view.writing(rdd, format_line, changed=False))
    words, total = view.figures(rdd)
    manifest = new_manifest(settings, batch_ms, words, total, position)
    kept = publish(fs, settings, temp, final, manifest)
    if settings.source == "files" and kept:
        # Entries that the oldest kept snapshot already includes are not needed any more.
        InputFilesLog(log_fs, settings.checkpoint_dir).prune(kept[0] + 1)
    return final


def publish(
    fs: HadoopFs, settings: SnapshotSettings, temp: str, final: str, manifest: Manifest
) -> list[int]:
    """Rename a written snapshot into place, write its manifest last, prune; the kept times."""
    fs.publish_dir(temp, final)
    # The manifest last, as the commit marker: a directory rename is a copy on object
    # stores, and a snapshot without its manifest is never restored from.
    body = json.dumps(manifest.to_json(), sort_keys=True) + "\n"
    fs.write_atomic(join(final, MANIFEST), body.encode("utf-8"))
    names = fs.list_names(settings.directory)
    doomed = to_prune(names, settings.keep, manifest.batch_time_ms)
    for name in doomed:
        fs.delete(join(settings.directory, name))
    return sorted(t for n in names if n not in doomed and (t := snapshot_batch(n)) is not None)


def needless(fs: FileSystem, times: list[int], batch_ms: int, settings: SnapshotSettings) -> bool:
    """A batch replayed after recovery: its snapshot is there already, or would be pruned."""
    if sum(1 for t in times if t > batch_ms) >= settings.keep:
        return True
    if batch_ms not in times:
        return False
    try:
        read_manifest(fs, join(settings.directory, snapshot_name(batch_ms)))
    except ValueError:
        return False  # damaged: write it again
    log.debug("snapshot batch_time_ms=%d exists (a replayed batch); kept", batch_ms)
    return True


def _position(
    rdd: RDD[Any],
    batch_ms: int,
    settings: SnapshotSettings,
    fs: FileSystem,
    log_fs: FileSystem,
    times: list[int],
) -> dict[str, Any]:
    if settings.source == "files":
        # Unlike the other sources, the files a snapshot includes accumulate over batches.
        return {"files": sorted(_files_counted(rdd, batch_ms, settings, fs, log_fs, times))}
    return batch_position(log_fs, settings.source, settings.checkpoint_dir, batch_ms, required=True)


def _files_counted(
    rdd: RDD[Any],
    batch_ms: int,
    settings: SnapshotSettings,
    fs: FileSystem,
    log_fs: FileSystem,
    times: list[int],
) -> set[str]:
    """Files the totals as of `batch_ms` include (or that the stream skipped at its start).

    The newest earlier snapshot of this context, plus the files logged since, limited
    to those still in the input directory (a file moved away needs no remembering).
    """
    from streaming_app.common.hadoop_fs import HadoopFs

    assert settings.input_dir is not None
    counted: set[str] = set()
    after: int | None = None
    for earlier in reversed([t for t in times if t < batch_ms]):
        try:
            manifest = read_manifest(fs, join(settings.directory, snapshot_name(earlier)))
        except ValueError:
            continue
        if manifest.context_id == settings.context_id:
            counted, after = set(manifest.files()), earlier
        break
    counted |= files_read_between(log_fs, settings.checkpoint_dir, after, batch_ms)
    present = set(
        visible_names(HadoopFs(rdd.context, settings.input_dir).list_names(settings.input_dir))
    )
    return counted & present


def files_in_snapshots(directory: str, context_id: str) -> frozenset[str] | None:
    """The input files the newest readable snapshot of context `context_id` includes (each
    snapshot's list is cumulative), or None when there is none of that context.

    Driver side, for the files source (sources/late_files.py): the snapshot writer prunes
    the input-files log entries that the oldest kept snapshot includes.
    """
    from streaming_app.common.path_fs import filesystem_for

    fs = filesystem_for(directory)
    for batch_ms in reversed(snapshot_times(fs, directory)):
        try:
            manifest = read_manifest(fs, join(directory, snapshot_name(batch_ms)))
        except ValueError:
            continue
        return frozenset(manifest.files()) if manifest.context_id == context_id else None
    return None
