"""Files sink: each batch's totals as a base or a delta (or the window), written atomically.

Runs on the driver, as an output operation, through Hadoop's FileSystem. A base
(`totals-<batch_ms>/`, every total) is written by the executors (`saveAsTextFile`); a
delta (`delta-<batch_ms>/`, the totals the batch changed, which the state's buckets
carry: as many as the batch's input, not the state's keys) and the window are collected
and written by the driver, one part file. Each is written under a temporary name and
renamed into place; then old ones are pruned. A replayed batch writes the same again.
The layout and how it is read back: files_layout.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.common.prometheus import succeeded
from streaming_app.sinks.commit import mark_written
from streaming_app.sinks.files_layout import (
    CHAIN_MARKER,
    DELTA,
    LINK_KINDS,
    SUCCESS_MARKER,
    TOTALS,
    WINDOW,
    Link,
    chain_break,
    format_link,
    format_total,
    parse_link,
    temp_name,
    to_prune,
    to_prune_chain,
    totals_name,
)
from streaming_app.state.figures import note_state

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.common.hadoop_fs import HadoopFs
    from streaming_app.settings.schema import AppConfig
    from streaming_app.state.view import StateView


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FilesSettings:
    """What the files sink captures into the checkpoint: plain values only."""

    output_dir: str
    keep: int  # bases kept
    base_ms: int  # a base at every batch time that is a multiple of this
    batch_ms: int
    context_id: str  # the checkpoint's app id: whose chain a base or delta is

    @classmethod
    def from_config(cls, config: AppConfig, context_id: str) -> FilesSettings:
        """The files sink's settings of a run; needs an output_dir."""
        assert config.output_dir is not None
        return cls(
            config.output_dir,
            config.output_keep,
            config.output_base_ms,
            config.batch_ms,
            context_id,
        )


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def write_collected(fs: HadoopFs, temp: str, pairs: list[tuple[str, Any]]) -> None:
    """A small output as one part file written by the driver (no Hadoop output job)."""
    body = "".join(format_total(pair) + "\n" for pair in pairs)
    fs.mkdirs(temp)
    fs.write_atomic(_join(temp, "part-00000"), body.encode("utf-8"))
    fs.write_atomic(_join(temp, SUCCESS_MARKER), b"")


def complete_outputs(
    fs: HadoopFs, settings: FilesSettings, names: list[str], batch_ms: int
) -> list[tuple[str, Link | None]]:
    """A batch's complete outputs (delta, base) with their chain markers (None: no marker)."""
    found = []
    for kind in (DELTA, TOTALS):
        name = totals_name(batch_ms, kind)
        path = _join(settings.output_dir, name)
        if name in names and fs.exists(_join(path, SUCCESS_MARKER)):
            marker = _join(path, CHAIN_MARKER)
            found.append((kind, parse_link(fs.read_bytes(marker)) if fs.exists(marker) else None))
    return found


def base_due(settings: FilesSettings, batch_ms: int, previous_ms: int) -> bool:
    """Whether a base is due: a multiple of base_ms in (previous_ms, batch_ms]; for batch
    times at multiples of the batch interval (DStreams), when batch_ms is one."""
    return previous_ms // settings.base_ms != batch_ms // settings.base_ms


def _plan(
    fs: HadoopFs,
    settings: FilesSettings,
    names: list[str],
    batch_ms: int,
    previous_ms: int,
    changes_known: bool,
    due: bool | None,
) -> tuple[str, str | None]:
    """TOTALS (a base) or DELTA for this batch, and why the chain broke (None if it did not).

    due: whether a base is due (None: `base_due` decides)."""
    if due is None:
        due = base_due(settings, batch_ms, previous_ms)
    if not changes_known or due:
        return TOTALS, None  # the state cannot tell what changed, or a base is due
    links = [link for _, link in complete_outputs(fs, settings, names, previous_ms)]
    broken = chain_break(settings.context_id, links)
    return (TOTALS, broken) if broken else (DELTA, None)


def write_chain(
    fs: HadoopFs,
    settings: FilesSettings,
    batch_ms: int,
    changed: Callable[[], list[tuple[str, Any]] | None] | None,
    write_base: Callable[[str], None],
    previous_ms: int | None = None,
    due: bool | None = None,
) -> str:
    """Write a batch's base or delta into the output dir, atomically; returns its kind.

    changed: the totals the batch changed, collected (None: the state cannot tell);
    write_base: writes every total as part files and `_SUCCESS` into a directory;
    previous_ms: the batch time of the batch before [batch_ms minus the batch interval];
    due: whether a base is due [None: by base_ms, `base_due`]; a broken chain, or a
    state that cannot tell what changed, makes a base all the same.
    """
    started = time.monotonic()
    out = settings.output_dir
    names = fs.list_names(out)
    previous = batch_ms - settings.batch_ms if previous_ms is None else previous_ms
    kind, broken = _plan(fs, settings, names, batch_ms, previous, changed is not None, due)
    pairs = changed() if changed is not None and kind == DELTA else None
    kind = TOTALS if pairs is None else DELTA
    temp = _join(out, temp_name(batch_ms, kind))
    fs.delete(temp)  # left over from a run killed while writing this batch
    written = ""
    if pairs is not None:
        write_collected(fs, temp, pairs)
        written = f" keys={len(pairs)}"
    else:
        if broken:
            log.info(
                "files sink: batch_time_ms=%d written as a base (every total): %s",
                batch_ms,
                broken,
            )
        write_base(temp)
    link = Link(settings.context_id, previous, LINK_KINDS[kind])
    fs.write_atomic(_join(temp, CHAIN_MARKER), format_link(link))
    final = totals_name(batch_ms, kind)
    # A replay of a batch that completed before the crash writes the same content again.
    fs.publish_dir(temp, _join(out, final))
    for name in to_prune_chain([*names, final], settings.keep, batch_ms):
        fs.delete(_join(out, name))
    took = time.monotonic() - started
    succeeded("files", took)
    log.debug(
        "wrote %s batch_time_ms=%d%s in %.0f ms path=%s",
        LINK_KINDS[kind],
        batch_ms,
        written,
        took * 1000,
        _join(out, final),
    )
    return kind


def write_totals(
    batch_time: datetime, rdd: RDD[Any], view: StateView, settings: FilesSettings
) -> None:
    """Files sink: this batch's base (every total) or delta (what it changed), atomically.

    rdd: the state's RDD, read through `view`: the changed totals come from the buckets
    (collected once per batch for every sink), a base from every bucket (by executors).
    """
    from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

    batch_ms = epoch_ms(batch_time)
    write_chain(
        HadoopFs(rdd.context, settings.output_dir),
        settings,
        batch_ms,
        (lambda: view.changed(rdd)) if view.bucketed and view.changes else None,
        lambda temp: view.lines(rdd, format_total).saveAsTextFile(temp),
    )
    mark_written(batch_ms, "files")
    note_state(batch_time, rdd, view)


def write_window_files(
    batch_time: datetime, rdd: RDD[tuple[str, Any]], output_dir: str, keep: int
) -> None:
    """Files sink: the whole window as `window-<batch_ms>/`, in the totals' layout.

    Written by the driver (one collect, one file) rather than by a Hadoop output job, which
    costs a second or more on two cores, every slide. A replayed slide writes the same.
    """
    from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

    fs = HadoopFs(rdd.context, output_dir)
    write_window_pairs(fs, output_dir, epoch_ms(batch_time), rdd.collect(), keep)


def write_window_pairs(
    fs: HadoopFs, output_dir: str, batch_ms: int, pairs: list[tuple[str, Any]], keep: int
) -> None:
    """The window ending at batch_ms, collected, as `window-<batch_ms>/`; older ones pruned."""
    temp = _join(output_dir, temp_name(batch_ms, WINDOW))
    final = _join(output_dir, totals_name(batch_ms, WINDOW))
    fs.delete(temp)  # left over from a run killed while writing this batch
    write_collected(fs, temp, pairs)
    fs.publish_dir(temp, final)
    for name in to_prune(fs.list_names(output_dir), keep, batch_ms, WINDOW):
        fs.delete(_join(output_dir, name))
    log.debug("wrote window batch_time_ms=%d path=%s", batch_ms, final)
