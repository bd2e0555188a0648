"""Spark's metadata checkpoints of the DStream engine, watched: a batch left without one fails.

Driver side, in the streaming listener. Spark's JVM writes a `checkpoint-<ms>` file for
every batch it generates (its CheckpointWriter, on a thread of its own, each write retried
three times) and reports a write that failed in its own log only: a full disk, a
permission, a lost HDFS would leave the app checkpointing nothing while its batches
complete. After each completed batch the listener lists the checkpoint directory (one
listing, a few milliseconds): a batch whose time is more than `LAG_BATCHES` intervals after
the newest checkpoint file counts once as a failed checkpoint on the Prometheus endpoint
(`streaming_app_failures_total{operation="checkpoint"}`, which StreamingAppOperationsFailing
pages on), with a warning in the log. A listing that fails counts the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from streaming_app.common.checkpoint_files import checkpoint_file_times
from streaming_app.common.prometheus import failed

log = logging.getLogger(__name__)

# Spark writes a batch's file when it plans the batch, before it runs: by the time a batch
# completes, its own file or its predecessor's is there unless writes fail.
LAG_BATCHES = 2


class CheckpointWatch:
    """Counts each completed batch that Spark's metadata checkpoint has fallen behind.

    list_names: the checkpoint directory's names (raises if it cannot be listed);
    batch_ms: the batch interval."""

    def __init__(self, list_names: Callable[[], list[str]], batch_ms: int) -> None:
        self.list_names = list_names
        self.batch_ms = batch_ms
        self._warned = False

    def after_batch(self, batch_ms: int) -> bool:
        """Check after batch `batch_ms` completed; True (and counted) if its checkpoint is
        missing."""
        try:
            newest = max(checkpoint_file_times(self.list_names()), default=None)
        except Exception as exc:  # a listener must not break the stream
            return self._missing(batch_ms, None, f"the directory cannot be listed: {exc}")
        if newest is not None and newest >= batch_ms - LAG_BATCHES * self.batch_ms:
            if self._warned:
                log.info("Spark's checkpoints are written again (batch_time_ms=%d)", newest)
            self._warned = False
            return False
        return self._missing(batch_ms, newest, "Spark's own log says why")

    def _missing(self, batch_ms: int, newest: int | None, why: str) -> bool:
        failed("checkpoint")
        if not self._warned:
            since = "none is there" if newest is None else f"the newest is of {newest}"
            log.warning(
                "batch_time_ms=%d completed without a Spark checkpoint (%s; %s): a driver "
                "restarted now would replay from an older one or start afresh",
                batch_ms,
                since,
                why,
            )
        self._warned = True
        return True
