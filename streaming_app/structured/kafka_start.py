"""Where a structured Kafka query starts, for the lag served before its first micro-batch.

Driver side, once, as the query starts (query.py): a recovered query resumes at the end
offsets of its newest committed micro-batch (the offsets log entry of that batch); a new
one (or one whose first micro-batch never committed) at `starting_offsets` applied to the
broker's offsets, as the source's `initialOffset` does (kafka_source.py; its planner runs
in another process, so the driver asks the broker itself, in a thread of its own so that a
broker down does not hold up the start). The positions go to the endpoint's lag
bookkeeping (common/kafka_lag.py `started`), which a batch's own positions then replace.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from streaming_app.common.fs import FileSystem
from streaming_app.common.prometheus import endpoint, kafka_started
from streaming_app.sources.kafka.client import Broker
from streaming_app.structured.kafka_offsets import Positions, from_json, initial_positions
from streaming_app.structured.kafka_options import KafkaReadSettings
from streaming_app.structured.query_log import offsets_entry

log = logging.getLogger(__name__)


def committed_positions(
    fs: FileSystem, checkpoint_dir: str, committed: int, topics: Sequence[str]
) -> Positions | None:
    """The end offsets of micro-batch `committed` for `topics` (the query's Kafka source
    among its sources), None if its entry has none."""
    entry = offsets_entry(fs, checkpoint_dir, committed)
    for source in entry.sources if entry is not None else ():
        try:
            positions = from_json(source if isinstance(source, dict) else None)
        except ValueError:
            continue  # another source's offset (the seed's)
        if positions and {topic for topic, _ in positions} <= set(topics):
            return positions
    return None


def new_positions(settings: KafkaReadSettings) -> Positions:
    """Where a new query starts: starting_offsets applied to the broker's offsets."""
    broker = Broker(settings.connection, client_id="streaming-app-lag-start")
    try:
        want_committed = settings.starting_offsets == "committed"
        found = broker.offsets(settings.topics, settings.group_id, want_committed)
    finally:
        broker.close()
    return initial_positions(found, settings.starting_offsets, settings.on_out_of_range).positions


def report_start(
    fs: FileSystem, checkpoint_dir: str, committed: int | None, settings: KafkaReadSettings
) -> None:
    """Hand the endpoint (if one serves) where the query starts; never fails the run."""
    if endpoint() is None:
        return
    try:
        found = None
        if committed is not None:
            found = committed_positions(fs, checkpoint_dir, committed, settings.topics)
        if found is not None:
            kafka_started(found)
            return
    except Exception as exc:  # the lag then comes with the first micro-batch
        log.debug("the query's start offsets: %s", exc, exc_info=True)
        return

    def ask() -> None:
        try:
            kafka_started(new_positions(settings))
        except Exception as exc:
            log.debug("the query's start offsets from the broker: %s", exc, exc_info=True)

    threading.Thread(target=ask, name="kafka-lag-start", daemon=True).start()
