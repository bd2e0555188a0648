"""The window query's sinks: each closed window, whole, as the DStream engine writes a window.

Driver side, in foreachBatch ("append" mode: a window is output once, when it closed; a
replayed micro-batch outputs the same windows). Each window is collected (as the DStream
window sinks collect theirs) and written by end time, oldest first: the files sink's
`window-<end_ms>/` (rewritten whole on a replay, the newest `output_keep` kept), the
console's `Window at time ...` line, and the postgres sink's `<table>_window`, replaced in
one transaction with its progress row (a window not newer than the recorded one is
skipped).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.output_errors import app_errors_in_one_line
from streaming_app.sinks.console import print_line
from streaming_app.sinks.files import write_window_pairs
from streaming_app.state.buckets import top
from streaming_app.structured.state_layout import KEY, TOTAL, exact

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)
WINDOW = "window"  # the window column Spark's window() makes: a struct of start and end


def by_window(rows: list[Any]) -> dict[int, list[tuple[str, Any]]]:
    """(end ms, key, total) rows as each window's end -> its (key, total) pairs, by end."""
    found: dict[int, list[tuple[str, Any]]] = {}
    for end_ms, key, total in rows:
        found.setdefault(int(end_ms), []).append((key, exact(total)))
    return {end: sorted(pairs) for end, pairs in sorted(found.items())}


@dataclass
class WindowSinks:
    """The window query's foreachBatch function."""

    config: AppConfig

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Write every window micro-batch `batch_id` closed, oldest first."""
        from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

        # The end as epoch ms in Spark: a timestamp collected is a naive local datetime.
        ends = F.unix_millis(F.col(f"{WINDOW}.end"))
        windows = by_window(batch.select(ends, KEY, TOTAL).collect())
        with app_errors_in_one_line(batch.sparkSession.sparkContext):
            self._write(batch, batch_id, windows)

    def _write(self, batch: DataFrame, batch_id: int, windows: dict[int, list[Any]]) -> None:
        from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

        config = self.config
        for end_ms, pairs in windows.items():
            for sink in config.sinks:
                if sink == "files":
                    assert config.output_dir is not None
                    fs = HadoopFs(batch.sparkSession.sparkContext, config.output_dir)
                    write_window_pairs(fs, config.output_dir, end_ms, pairs, config.output_keep)
                elif sink == "console":
                    best = top(pairs, config.top_n)
                    print_line(datetime.fromtimestamp(end_ms / 1000), best, label="Window")
                elif sink == "postgres":
                    self._postgres(end_ms, pairs)
            log.info(
                "window batch_id=%d window_end_ms=%d: %d keys written", batch_id, end_ms, len(pairs)
            )

    def _postgres(self, end_ms: int, pairs: list[tuple[str, Any]]) -> None:
        from streaming_app.sinks.postgres.stream import writer_for

        writer = writer_for(self.config.postgres_table, self.config.job == "keyed-sum")
        if not writer.write_window(end_ms, pairs):
            log.info("window at window_end_ms=%d: already in postgres; skipped", end_ms)
