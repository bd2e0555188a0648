"""Files sink: each batch's totals as a base or a delta (or the window), written atomically.

Runs on the driver, as an output operation, through Hadoop's FileSystem; the lines are
written by the executors, one part file per partition (parts.py), and none passes
through the driver. A base (`totals-<batch_ms>/`) holds every total, a delta
(`delta-<batch_ms>/`) the totals the batch changed, which the state's buckets carry (as
many as the batch's input, not the state's keys), a window (`window-<batch_ms>/`) the
whole window. Each is written under a temporary name and renamed into place by the
driver; then old ones are pruned. A replayed batch writes the same again. The layout and
how it is read back: files_layout.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.common.prometheus import counting_failures, succeeded
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
from streaming_app.sinks.parts import write_parts
from streaming_app.state.observe import observe_state

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


@counting_failures("files")
def write_chain(
    fs: HadoopFs,
    settings: FilesSettings,
    batch_ms: int,
    write_delta: Callable[[str], None] | None,
    write_base: Callable[[str], None],
    previous_ms: int | None = None,
    due: bool | None = None,
) -> str:
    """Write a batch's base or delta into the output dir, atomically; returns its kind.

    write_delta: writes the totals the batch changed as part files and `_SUCCESS` into a
    directory (None: the state cannot tell what changed);
    write_base: writes every total as part files and `_SUCCESS` into a directory;
    previous_ms: the batch time of the batch before [batch_ms minus the batch interval];
    due: whether a base is due [None: by base_ms, `base_due`]; a broken chain, or a
    state that cannot tell what changed, makes a base all the same. A failure counts on
    the metrics endpoint.
    """
    started = time.monotonic()
    out = settings.output_dir
    names = fs.list_names(out)
    previous = batch_ms - settings.batch_ms if previous_ms is None else previous_ms
    kind, broken = _plan(fs, settings, names, batch_ms, previous, write_delta is not None, due)
    temp = _join(out, temp_name(batch_ms, kind))
    fs.delete(temp)  # left over from a run killed while writing this batch
    if kind == DELTA:
        assert write_delta is not None
        write_delta(temp)
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
        "wrote %s batch_time_ms=%d in %.0f ms path=%s",
        LINK_KINDS[kind],
        batch_ms,
        took * 1000,
        _join(out, final),
    )
    return kind


def write_totals(
    batch_time: datetime, rdd: RDD[Any], view: StateView, settings: FilesSettings
) -> None:
    """Files sink: this batch's base (every total) or delta (what it changed), atomically.

    rdd: the state's RDD, read through `view`: a delta from the buckets' changed totals,
    a base from every bucket, both written by the executors.
    """
    from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

    batch_ms = epoch_ms(batch_time)
    fs = HadoopFs(rdd.context, settings.output_dir)
    changed = view.changed_lines(rdd, format_total)
    # With buckets the writing job brings back the batch's digest (the console's top,
    # the metrics' figures): no job of its own after this one.
    write_chain(
        fs,
        settings,
        batch_ms,
        None
        if changed is None
        else lambda temp: write_parts(
            fs, changed, temp, view.writing(rdd, format_total, changed=True)
        ),
        lambda temp: write_parts(
            fs, view.lines(rdd, format_total), temp, view.writing(rdd, format_total, changed=False)
        ),
    )
    mark_written(batch_ms, "files")
    observe_state(batch_time, rdd, view)


def write_window_files(
    batch_time: datetime, rdd: RDD[tuple[str, Any]], output_dir: str, keep: int
) -> None:
    """Files sink: the whole window as `window-<batch_ms>/`, in the totals' layout, its
    part files written by the executors. A replayed slide writes the same."""
    from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

    fs = HadoopFs(rdd.context, output_dir)
    lines = rdd.map(format_total)
    write_window(
        fs, output_dir, epoch_ms(batch_time), lambda temp: write_parts(fs, lines, temp), keep
    )


def write_window(
    fs: HadoopFs, output_dir: str, batch_ms: int, write: Callable[[str], None], keep: int
) -> None:
    """The window ending at batch_ms as `window-<batch_ms>/`, its part files and `_SUCCESS`
    written into a temporary directory by `write`, then moved into place; older ones pruned."""
    temp = _join(output_dir, temp_name(batch_ms, WINDOW))
    final = _join(output_dir, totals_name(batch_ms, WINDOW))
    fs.delete(temp)  # left over from a run killed while writing this batch
    write(temp)
    fs.publish_dir(temp, final)
    for name in to_prune(fs.list_names(output_dir), keep, batch_ms, WINDOW):
        fs.delete(_join(output_dir, name))
    log.debug("wrote window batch_time_ms=%d path=%s", batch_ms, final)
