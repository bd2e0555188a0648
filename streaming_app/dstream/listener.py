"""A StreamingListener that turns Spark's streaming events into the app's own log lines.

And into metrics records, and the endpoint's counts of failed batches and of batches that
Spark's checkpoints fell behind (checkpoint_watch.py)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from pyspark.streaming.listener import StreamingListener

from streaming_app.common.failure_text import failure_summary
from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.metrics_recorder import MetricsRecorder, known, now_ms
from streaming_app.common.path_fs import filesystem_for
from streaming_app.common.prometheus import PartitionPosition, failed
from streaming_app.dstream.checkpoint_watch import CheckpointWatch
from streaming_app.settings.schema import AppConfig
from streaming_app.state.figures import FIGURES

log = logging.getLogger(__name__)


def receiver_warning(name: str, message: str, error: Any) -> str:
    """One line for a receiver's error: its message and, if any, the cause in its trace."""
    trace = str(error or "")
    if "RejectedExecutionException" in trace:
        # Only after a stop: Spark closes the receiver's write-ahead log before its block
        # generator pushes the last block it holds (ReceiverSupervisorImpl.onStop).
        return (
            f"receiver {name}: the lines it received in its last block interval before the "
            "stop were not stored (Spark closes the receiver's write-ahead log first); "
            "a socket source cannot read them again"
        )
    cause = failure_summary(trace) if trace.strip() else ""
    detail = f" ({cause})" if cause and cause not in message else ""
    return f"receiver {name}: {message}{detail}; Spark keeps retrying"


class LoggingListener(StreamingListener):
    """Logs receiver errors as one-line warnings; hands each completed batch to metrics."""

    def __init__(
        self,
        recorder: MetricsRecorder | None = None,
        source: str = "",
        batch_ms: int = 0,
        checkpoints: CheckpointWatch | None = None,
    ) -> None:
        super().__init__()
        self.recorder = recorder
        self.source = source
        self.batch_ms = batch_ms
        self.checkpoints = checkpoints

    @classmethod
    def for_config(cls, config: AppConfig, replay_until_ms: int | None = None) -> LoggingListener:
        """The listener of a run: metrics as configured.

        A recovered run replays its missed intervals up to `replay_until_ms` (epoch ms);
        their scheduling delay does not count as falling behind.
        """
        recorder = MetricsRecorder(config.metrics_file, config.progress)
        recorder.replay_until_ms = replay_until_ms
        fs = filesystem_for(config.checkpoint_dir)
        checkpoints = CheckpointWatch(
            partial(fs.list_names, config.checkpoint_dir), config.batch_ms
        )
        return cls(recorder, config.source, config.batch_ms, checkpoints)

    def onReceiverStarted(self, receiverStarted: Any) -> None:  # noqa: N802, N803 (Spark API)
        """A receiver (the socket source) started."""
        try:
            info = receiverStarted.receiverInfo()
            log.info("receiver %s started on %s", info.name(), info.location())
        except Exception:  # a listener must never break the stream
            log.debug("could not describe started receiver", exc_info=True)

    def onReceiverError(self, receiverError: Any) -> None:  # noqa: N802, N803
        """A receiver reported an error; Spark restarts it after a delay."""
        self._warn(receiverError)

    def onReceiverStopped(self, receiverStopped: Any) -> None:  # noqa: N802, N803
        """A receiver stopped: on purpose, or to restart after an error (unreachable socket)."""
        self._warn(receiverStopped)

    @staticmethod
    def _warn(event: Any) -> None:
        try:
            info = event.receiverInfo()
            message = str(info.lastErrorMessage() or "")
            if not message or message == "Stopped by driver":
                return
            log.warning("%s", receiver_warning(str(info.name()), message, info.lastError()))
        except Exception:
            log.warning("a receiver reported an error; Spark keeps retrying")

    def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803
        """A batch finished all its output operations: record its metrics; count it if
        Spark's checkpoints fell behind (checkpoint_watch.py)."""
        if self.recorder is None:
            return
        try:
            record = self._record(batchCompleted.batchInfo())
            if self.checkpoints is not None:
                self.checkpoints.after_batch(record.batch_time_ms)
            partitions = self._positions(record.batch_time_ms)
        except Exception:
            log.debug("could not describe completed batch", exc_info=True)
            return
        self.recorder.record(record, partitions)

    def onOutputOperationCompleted(self, outputOperationCompleted: Any) -> None:  # noqa: N802, N803
        """A batch's output operation that failed counts as a failed batch on the endpoint."""
        try:
            # PySpark's JavaStreamingListenerOutputOperationInfo: a String, null (None
            # here) when the operation succeeded; not Scala's Option.
            if outputOperationCompleted.outputOperationInfo().failureReason():
                failed("batch")
        except Exception:  # a listener must never break the stream
            log.debug("could not read an output operation's outcome", exc_info=True)

    def _positions(self, batch_ms: int) -> list[PartitionPosition]:
        """The Kafka source's partitions after the batch (for the Prometheus endpoint)."""
        if self.source != "kafka":
            return []
        from streaming_app.sources.kafka.runtime import batch_positions

        return [PartitionPosition(*position) for position in batch_positions(batch_ms)]

    def _record(self, info: Any) -> BatchMetrics:
        batch_ms = int(info.batchTime().milliseconds())
        records: int | None = int(info.numRecords())
        lag = None
        if self.source == "kafka":
            # Our Kafka stream is a transform Spark does not count; the source knows.
            from streaming_app.sources.kafka.runtime import batch_figures

            figures = batch_figures(batch_ms)
            records, lag = figures if figures else (None, None)
        elif self.source == "files":
            # Spark's file stream reports 0 records, whatever it read; its jobs counted.
            from streaming_app.sources.line_counts import batch_lines

            records = batch_lines(batch_ms)
        keys, words = FIGURES.take(batch_ms)
        return BatchMetrics(
            batch_time_ms=batch_ms,
            batch_interval_ms=self.batch_ms,
            records=records,
            processing_ms=known(int(info.processingDelay())),
            scheduling_delay_ms=known(int(info.schedulingDelay())),
            total_delay_ms=known(int(info.totalDelay())),
            kafka_lag=lag,
            completed_ms=now_ms(),
            engine="dstream",
            words=words,
            state_keys=keys,
        )
