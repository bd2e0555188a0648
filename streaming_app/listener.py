"""A StreamingListener that turns Spark's streaming events into the app's own log lines."""

from __future__ import annotations

import logging
from typing import Any

from pyspark.streaming.listener import StreamingListener

log = logging.getLogger(__name__)


class LoggingListener(StreamingListener):
    """Logs receiver errors as one-line warnings and each completed batch at debug level."""

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
            log.warning("receiver %s: %s; Spark keeps retrying", info.name(), message)
        except Exception:
            log.warning("a receiver reported an error; Spark keeps retrying")

    def onBatchCompleted(self, batchCompleted: Any) -> None:  # noqa: N802, N803
        """A batch finished all its output operations."""
        try:
            info = batchCompleted.batchInfo()
            log.debug(
                "batch completed batch_time_ms=%d records=%d processing_ms=%s delay_ms=%s",
                info.batchTime().milliseconds(),
                info.numRecords(),
                info.processingDelay(),  # JavaBatchInfo: -1 when unknown
                info.schedulingDelay(),
            )
        except Exception:
            log.debug("could not describe completed batch", exc_info=True)
