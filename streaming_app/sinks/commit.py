"""The per-batch commit protocol, in one place: every sink writes the batch, then it is committed.

For a batch time T, on the driver, in this order:

1. **Sinks write.** Spark runs a batch's output operations in the order they were
   registered; each sink's operation (console, files, postgres) writes T and then calls
   `mark_written(T, sink)`. A sink that fails does not mark it. Spark still runs the later
   output operations of the batch, which is why the next step checks.
2. **All succeeded?** `commit_batch`, registered by `attach_commit` as the *last* output
   operation, takes the marks of T: if a configured sink is missing, T is not committed
   (the app stops on the failure; the restart replays T, and every sink is idempotent per
   batch time).
3. **Commit log.** The source records T as done: Kafka writes `commits/<T>`.
4. **Group commit.** Kafka commits T's end offsets to the consumer group, if one is set,
   for lag tools only (the offset log is the truth).
5. **Housekeeping.** Old offset and commit log entries that no recovery can need are pruned.

Sources without a commit log (socket, files) need no commit step: the files source logs
what each batch read when it plans it (sources/files.py).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.common.per_batch import take_batch
from streaming_app.common.prometheus import timed

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.streaming import DStream

    from streaming_app.settings.schema import AppConfig
    from streaming_app.sources.kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

# Sinks that have written each batch in this driver process: {batch_ms: {sink, ...}}.
_written: dict[int, set[str]] = {}


def mark_written(batch_ms: int, sink: str) -> None:
    """Step 1: record that `sink` has written batch `batch_ms`."""
    _written.setdefault(batch_ms, set()).add(sink)


def take_written(batch_ms: int) -> set[str]:
    """The sinks that wrote batch `batch_ms`; forgets it and every older batch."""
    return take_batch(_written, batch_ms, set())


def commit_batch(
    batch_time: datetime, rdd: RDD[Any], settings: KafkaSettings, sinks: tuple[str, ...]
) -> None:
    """Steps 2 to 5 for one batch (the last output operation of the graph)."""
    from streaming_app.sources.kafka import commit as kafka

    batch_ms = epoch_ms(batch_time)
    # 2. Every configured sink wrote the batch, or nothing is committed.
    missing = set(sinks) - take_written(batch_ms)
    if missing:
        log.warning(
            "batch_time_ms=%d: not committed: sink(s) %s did not complete (the app "
            "stops; the restart replays the batch)",
            batch_ms,
            ", ".join(sorted(missing)),
        )
        return
    with timed("commit"):
        # 3. The commit log: the batch is done.
        ranges = kafka.write_commit(batch_ms, rdd.isCheckpointed(), settings)
        # 4. The group commit, for lag tools.
        kafka.commit_group(batch_ms, ranges, settings)
    # 5. Prune what no recovery can need.
    kafka.prune_logs(batch_ms, settings)


def attach_commit(state: DStream[Any], config: AppConfig) -> None:
    """Register the commit as the last output operation, after every sink (Kafka only)."""
    if config.source != "kafka":
        return
    from streaming_app.sources.kafka.settings import KafkaSettings

    settings = KafkaSettings.from_config(config)
    sinks = config.sinks
    # Captures frozen settings and a tuple only, so it pickles into the checkpoint.
    state.foreachRDD(lambda t, rdd: commit_batch(t, rdd, settings, sinks))
