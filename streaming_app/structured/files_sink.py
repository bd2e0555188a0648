"""The files sink of the structured engine: each micro-batch as a delta or a base, atomically.

Driver side, in foreachBatch; a base is written by the executors. The same layout as the
DStream engine's (sinks/files.py writes it, files_layout.py reads it back, `streaming-app
totals` prints it): a micro-batch is named by its timestamp from the offsets log, its
chain marker names the micro-batch before, and the context is the query id. A delta holds
the totals the micro-batch changed; a base, when one is due or the chain starts or
breaks, every total (files_base.py). Both are written as part files by the executors
(Spark's text writer, from Spark's own expressions), so `output_dir` may be on any Hadoop
file system and no total passes through the driver or Python. A replayed micro-batch
whose output is already there leaves it; otherwise it writes what it wrote before (same
input, same state).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from streaming_app.sinks.files import FilesSettings, complete_outputs, write_chain

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


def write_files(
    fs: HadoopFs,
    settings: FilesSettings,
    batch_ms: int,
    previous_ms: int,
    write_delta: Callable[[str], None],
    write_base: Callable[[str], None],
    due: bool,
) -> str:
    """Write a micro-batch's delta (its changed totals) or base; returns its kind.

    write_delta: writes the micro-batch's changed totals as part files into a directory;
    write_base: writes every total after the micro-batch as part files into a directory
    (files_base.py `base_writer`); due: whether a base is due (a chain that broke makes
    one all the same).
    """
    kind = written_kind(fs, settings, batch_ms)
    if kind is not None:
        log.info("files sink: batch_time_ms=%d was written before the restart (%s)", batch_ms, kind)
        return kind
    return write_chain(fs, settings, batch_ms, write_delta, write_base, previous_ms, due)
