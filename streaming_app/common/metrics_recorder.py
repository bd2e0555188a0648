"""Per-batch metrics: one JSON line per completed batch, a progress line, a falling-behind warning.

Engine-neutral, on the driver: fed by the DStream engine's StreamingListener
(dstream/listener.py) and the structured engine's StreamingQueryListener
(structured/listener.py). The format is documented in
docs/metrics.md and read back by `streaming-app report` (common/metrics_record.py, tools/report.py).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict
from datetime import datetime, timezone

from streaming_app.common.metrics_record import BatchMetrics, delay_growing
from streaming_app.common.prometheus import PartitionPosition, endpoint

log = logging.getLogger(__name__)

# Batches of rising scheduling delay before the app says it cannot keep up.
GROWTH_WINDOW = 5


def known(value: int) -> int | None:
    """Spark's "unknown" (-1) as None."""
    return value if value >= 0 else None


def progress_line(record: BatchMetrics) -> str:
    """The human line for one batch, e.g. for `docker compose logs -f`."""
    stamp = datetime.fromtimestamp(record.batch_time_ms / 1000, tz=timezone.utc)

    def seconds(ms: int | None) -> str:
        return "?" if ms is None else f"{ms / 1000:.2f}s"

    parts = [
        f"batch {stamp:%H:%M:%S} UTC",
        f"records={'?' if record.records is None else record.records}",
        f"processing={seconds(record.processing_ms)}",
        f"scheduling_delay={seconds(record.scheduling_delay_ms)}",
        f"total_delay={seconds(record.total_delay_ms)}",
    ]
    if record.kafka_lag is not None:
        parts.append(f"kafka_lag={record.kafka_lag}")
    return " ".join(parts)


class MetricsRecorder:
    """Writes, logs and watches the completed batches of one driver process."""

    def __init__(self, metrics_file: str | None, progress: bool) -> None:
        self.metrics_file = metrics_file
        self.progress = progress
        self.delays: deque[int] = deque(maxlen=GROWTH_WINDOW)
        self.warned = False
        self.over = 0  # structured: micro-batches in a row that took longer than the interval
        # Batches up to this time (epoch ms) replay a recovered run's missed intervals.
        self.replay_until_ms: int | None = None
        self._lock = threading.Lock()

    def record(self, batch: BatchMetrics, partitions: Iterable[PartitionPosition] = ()) -> None:
        """Handle one completed batch; never raises (a listener must not break the stream).

        `partitions`: the Kafka source's positions after it, for the Prometheus endpoint.
        """
        with self._lock:
            if self.progress:
                log.info("%s", progress_line(batch))
            self._watch(batch)
            if self.metrics_file:
                self._append(batch)
            served = endpoint()
            if served is not None:
                try:
                    replayed = (
                        self.replay_until_ms is not None
                        and batch.batch_time_ms <= self.replay_until_ms
                    )
                    served.observe(batch, self.warned, partitions, replayed)
                except Exception:  # never break the stream over a metric
                    log.debug("could not update the Prometheus metrics", exc_info=True)

    def idle(self) -> None:
        """A trigger found no new input (the structured engine): whatever fell behind has
        caught up, though no micro-batch ran to say so."""
        with self._lock:
            self.over = 0
            self._behind(False, True, "", "no new input")
            served = endpoint()
            if served is not None:
                served.idle()

    def _watch(self, batch: BatchMetrics) -> None:
        if batch.engine == "structured":
            self._watch_micro_batch(batch)
            return
        if batch.scheduling_delay_ms is None:
            return
        if self.replay_until_ms is not None and batch.batch_time_ms <= self.replay_until_ms:
            return  # queued at the restart all at once: catch-up, not a job that falls behind
        self.delays.append(batch.scheduling_delay_ms)
        interval = batch.batch_interval_ms / 1000
        self._behind(
            delay_growing(list(self.delays), batch.batch_interval_ms, GROWTH_WINDOW),
            batch.scheduling_delay_ms <= batch.batch_interval_ms,
            f"scheduling delay grew for {GROWTH_WINDOW} batches in a row to "
            f"{batch.scheduling_delay_ms / 1000:.1f} s (batch interval {interval:.1f} s)",
            "scheduling delay is back under one batch interval",
        )

    def _watch_micro_batch(self, batch: BatchMetrics) -> None:
        """Spark queues no micro-batches: one that cannot keep up takes longer than the
        interval, every time (and the next starts at once, late). GROWTH_WINDOW of them in
        a row are falling behind; one within the interval is keeping up."""
        if batch.processing_ms is None:
            return
        over = batch.processing_ms > batch.batch_interval_ms
        self.over = self.over + 1 if over else 0
        interval = batch.batch_interval_ms / 1000
        self._behind(
            self.over >= GROWTH_WINDOW,
            not over,
            f"{GROWTH_WINDOW} micro-batches in a row took longer than the trigger interval "
            f"({batch.processing_ms / 1000:.1f} s, interval {interval:.1f} s)",
            "a micro-batch took less than the trigger interval again",
        )

    def _behind(self, behind: bool, keeping_up: bool, why: str, back: str) -> None:
        """Warn once when the job falls behind, and say once when it keeps up again; not
        while the run stops (the batches queued during an outage drain then, late by
        design, not because the job cannot keep up)."""
        if behind and not self.warned and not STOPPING.is_set():
            self.warned = True
            log.warning(
                "%s: the job cannot keep up with its input. Lower max_rate_per_partition "
                "(Kafka), add cores or raise the batch interval",
                why,
            )
        elif self.warned and keeping_up:
            self.warned = False
            log.info("%s: the job keeps up", back)

    def _append(self, batch: BatchMetrics) -> None:
        assert self.metrics_file is not None
        line = json.dumps(asdict(batch), separators=(",", ":")) + "\n"
        try:
            # One write of a whole line with O_APPEND: lines of two runs never interleave.
            fd = os.open(self.metrics_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("could not append to metrics_file %s: %s", self.metrics_file, exc)


# Set when the run's stop begins (lifecycle/stopping.py `wait_for_stop`), for the process.
STOPPING = threading.Event()


def note_stopping() -> None:
    """The run stops from now on: what drains is not judged as falling behind."""
    STOPPING.set()


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return int(time.time() * 1000)
