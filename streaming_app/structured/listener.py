"""The structured engine's StreamingQueryListener: each micro-batch's metrics and progress line.

Driver side: Spark calls `onQueryProgress` (through Py4J, on its listener thread) after
each micro-batch; progress.py turns the event into the metrics record, which the DStream
engine's recorder (common/metrics_recorder.py) logs as the progress line, watches and appends to
`metrics_file`. Idle triggers (no new input) run no micro-batch and write nothing.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from streaming_app.common.fs import FileSystem
from streaming_app.common.metrics_recorder import MetricsRecorder, now_ms
from streaming_app.common.prometheus import failed, succeeded
from streaming_app.settings.schema import AppConfig
from streaming_app.structured.problems import batch_words
from streaming_app.structured.progress import (
    Trigger,
    batch_metrics,
    checkpoint_ms,
    kafka_positions,
    trigger_of,
)
from streaming_app.structured.query_log import batch_timestamp
from streaming_app.structured.windows import WINDOW_QUERY

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class ProgressListener(StreamingQueryListener):
    """Hands each micro-batch's progress to the metrics recorder; never breaks the query."""

    def __init__(self, config: AppConfig, fs: FileSystem, recorder: MetricsRecorder) -> None:
        super().__init__()
        self.config = config
        self.fs = fs  # of the checkpoint: the micro-batches' timestamps
        self.recorder = recorder
        self._previous: tuple[int, Trigger] | None = None  # (batch id, trigger) last seen

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark API)
        """Nothing to record: run.py / query.py log the start."""

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        """A micro-batch finished: record its metrics."""
        try:
            text = event.progress.json
            log.debug("micro-batch progress (Spark's): %s", text)
            progress = json.loads(text)
            if progress.get("name") == WINDOW_QUERY:
                return  # the window query's micro-batches: the totals' query is the job's
            batch_id = int(progress["batchId"])
            previous = None
            if self._previous is not None and self._previous[0] == batch_id - 1:
                previous = self._previous[1]
            record = batch_metrics(
                progress,
                self._batch_ms(batch_id),
                self.config.batch_ms,
                previous,
                now_ms(),
                kafka=self.config.source == "kafka",
                words=batch_words(batch_id),
            )
            self._previous = (batch_id, trigger_of(progress))
            kafka = self.config.source == "kafka"
            partitions = kafka_positions(progress) if kafka else []
            took = checkpoint_ms(progress)
        except Exception:  # a listener must never break the stream
            log.debug("could not describe a micro-batch's progress", exc_info=True)
            return
        self.recorder.record(record, partitions)
        if took is not None:
            succeeded("checkpoint", took / 1000)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        """No new input: no micro-batch ran, nothing to record; a job that fell behind has
        caught up."""
        try:
            self.recorder.idle()
        except Exception:  # a listener must never break the stream
            log.debug("could not note an idle trigger", exc_info=True)

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        """run.py reports how the query ended; one that ended on an error counts as a
        failed batch on the endpoint."""
        try:
            if event.exception:
                failed("batch")
        except Exception:  # a listener must never break the stream
            log.debug("could not read how the query ended", exc_info=True)

    def _batch_ms(self, batch_id: int) -> int | None:
        try:
            return batch_timestamp(self.fs, self.config.checkpoint_dir, batch_id)
        except Exception:  # unreadable, or the JVM of a remote checkpoint is stopping
            log.debug("no offsets log timestamp for batch_id=%d", batch_id, exc_info=True)
            return None  # the trigger's start stands in


def attach_listener(spark: SparkSession, config: AppConfig) -> None:
    """Register the listener on the session's queries (before the query starts), if needed."""
    if not config.metrics_file and not config.progress and config.metrics_port is None:
        return
    from streaming_app.common.path_fs import filesystem_for

    recorder = MetricsRecorder(config.metrics_file, config.progress)
    listener = ProgressListener(config, filesystem_for(config.checkpoint_dir), recorder)
    spark.streams.addListener(listener)
