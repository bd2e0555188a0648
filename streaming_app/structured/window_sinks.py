"""The window query's sinks: each closed window, whole, as the DStream engine writes a window.

Driver side, in foreachBatch ("append" mode: a window is output once, when it closed; a
replayed micro-batch outputs the same windows); the executors move the rows. The
micro-batch is checkpointed where it is (`localCheckpoint`) and the driver learns only
which windows closed and how many keys each has (one row a window). Each window is then
written by end time, oldest first: the files sink's `window-<end_ms>/`, part files
written by the executors (rewritten whole on a replay, the newest `output_keep` kept);
the console's `Window at time ...` line, its top N ranked on the executors; and the
postgres sink's `<table>_window`, staged by the executors and replaced in one
transaction with its progress row (a window not newer than the recorded one is skipped).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from streaming_app.common.output_errors import app_errors_in_one_line
from streaming_app.sinks.console import print_line
from streaming_app.sinks.files import write_window
from streaming_app.structured.state_layout import KEY, TOTAL
from streaming_app.structured.totals import text_pairs, top_pairs, total_lines

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)
WINDOW = "window"  # the window column Spark's window() makes: a struct of start and end
END = "end_ms"


@dataclass
class WindowSinks:
    """The window query's foreachBatch function."""

    config: AppConfig

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Write every window micro-batch `batch_id` closed, oldest first."""
        from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

        # The end as epoch ms in Spark: a timestamp collected is a naive local datetime.
        ends = F.unix_millis(F.col(f"{WINDOW}.end")).alias(END)
        with app_errors_in_one_line(batch.sparkSession.sparkContext):
            # Run once, read per window (its blocks go with the frame, as sinks.py's).
            windows = batch.select(ends, KEY, TOTAL).localCheckpoint(eager=True)
            closed = windows.groupBy(END).count().orderBy(END).collect()  # a row a window
            for end_ms, keys in closed:
                self._write(windows.where(F.col(END) == end_ms).select(KEY, TOTAL), end_ms)
                log.info(
                    "window batch_id=%d window_end_ms=%d: %d keys written",
                    batch_id,
                    end_ms,
                    keys,
                )

    def _write(self, window: DataFrame, end_ms: int) -> None:
        """One closed window, (key, total) rows on the executors, to every sink."""
        from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

        config = self.config
        for sink in config.sinks:
            if sink == "files":
                assert config.output_dir is not None
                fs = HadoopFs(window.sparkSession.sparkContext, config.output_dir)
                write = total_lines(window).write.text  # by the executors
                write_window(fs, config.output_dir, end_ms, write, config.output_keep)
            elif sink == "console":
                best = top_pairs(window, config.top_n)
                print_line(datetime.fromtimestamp(end_ms / 1000), best, label="Window")
            elif sink == "postgres":
                self._postgres(window, end_ms)

    def _postgres(self, window: DataFrame, end_ms: int) -> None:
        from streaming_app.sinks.postgres.staging import FrameRows
        from streaming_app.sinks.postgres.stream import WINDOW, writer_for

        # Its own writer: the totals query writes at the same time (writer_for).
        writer = writer_for(self.config.postgres_table, self.config.job == "keyed-sum", WINDOW)
        if not writer.write_window_staged(FrameRows(text_pairs(window)), end_ms):
            log.info("window at window_end_ms=%d: already in postgres; skipped", end_ms)
