"""The files sink of the structured engine: each micro-batch as a delta or a base, atomically.

Driver side, in foreachBatch. The same layout as the DStream engine's (sinks/files.py
writes it, files_layout.py reads it back, `streaming-app totals` prints it): a micro-batch
is named by its timestamp from the offsets log, its chain marker names the micro-batch
before, and the context is the query id. A delta holds the totals the micro-batch changed
(transformWithState's output); a base, when one is due or the chain starts, is built on
the driver in this slice: the totals as of the micro-batch before, read back from the
output directory, updated with the changes. A replayed micro-batch whose output is
already there leaves it; otherwise it writes what it wrote before (same input, same state).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming_app.errors import SinkError
from streaming_app.sinks.files import (
    FilesSettings,
    complete_outputs,
    write_chain,
    write_collected,
)
from streaming_app.sinks.files_layout import (
    DELTA,
    TOTALS,
    read_chain,
    read_link,
    totals_name,
)

if TYPE_CHECKING:
    from streaming_app.common.hadoop_fs import HadoopFs

log = logging.getLogger(__name__)


def written_kind(fs: HadoopFs, settings: FilesSettings, batch_ms: int) -> str | None:
    """The kind of this context's complete output of a micro-batch, None if there is none."""
    names = fs.list_names(settings.output_dir)
    for kind, link in complete_outputs(fs, settings, names, batch_ms):
        if link is not None and link.context == settings.context_id:
            return kind
    return None


def totals_before(
    settings: FilesSettings,
    batch_id: int,
    previous_ms: int,
    initial: Callable[[], dict[str, Any]] = dict,
) -> dict[str, Any]:
    """Every total as of the micro-batch before (at previous_ms), from the output directory.

    Micro-batch 0 starts from `initial()`: empty, or a restored snapshot's totals. SinkError
    if the output does not reach the micro-batch before: this slice cannot read the totals
    from the state store.
    """
    if batch_id == 0:
        return initial()
    reached, totals = read_chain(settings.output_dir)
    link = read_link(os.path.join(settings.output_dir, totals_name(previous_ms, DELTA)))
    link = link or read_link(os.path.join(settings.output_dir, totals_name(previous_ms, TOTALS)))
    if reached != previous_ms or link is None or link.context != settings.context_id:
        raise SinkError(
            f"files sink: micro-batch {batch_id} needs every total, but the output of the "
            f"micro-batch before (batch_time_ms={previous_ms}) is not in {settings.output_dir}; "
            "restore that directory, or start over with a new checkpoint_dir and output_dir"
        )
    return totals


def write_files(
    fs: HadoopFs,
    settings: FilesSettings,
    batch_id: int,
    batch_ms: int,
    previous_ms: int,
    changes: list[tuple[str, Any]],
    initial: Callable[[], dict[str, Any]] = dict,
) -> str:
    """Write a micro-batch's delta (its changed totals) or base; returns its kind."""
    kind = written_kind(fs, settings, batch_ms)
    if kind is not None:
        log.info(
            "files sink: batch_id=%d batch_time_ms=%d was written before the restart (%s)",
            batch_id,
            batch_ms,
            kind,
        )
        return kind

    def write_base(temp: str) -> None:
        totals = totals_before(settings, batch_id, previous_ms, initial)
        totals.update(changes)
        write_collected(fs, temp, sorted(totals.items()))

    return write_chain(fs, settings, batch_ms, lambda: changes, write_base, previous_ms)
