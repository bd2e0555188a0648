"""Kafka lag served from the start, before the first batch completes, both engines: the app
started on a backlog with its first batch held up (the postgres sink's table locked
against writes by the test) serves the lag from where the run starts, in records and in
seconds by its own clock, and the time of its last reading; then the lock goes and the
batch completes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.integration.conftest import kafka_args
from tests.integration.harness import free_port, wait_for
from tests.integration.kafka_helpers import end_offsets, fresh_topic, send
from tests.integration.pg_helpers import postgres_config
from tests.integration.test_prometheus_kafka import samples

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
ENGINE_ARGS = {"dstream": [], "structured": ["--engine", "structured"]}


def served(port: int, topic: str) -> dict[str, dict[int, float]]:
    """The endpoint's Kafka series of `topic` by name and partition, and the unlabelled
    ones by name under partition -1."""
    found: dict[str, dict[int, float]] = {}
    for s in samples(port):
        if s.labels.get("topic") == topic:
            found.setdefault(s.name, {})[int(s.labels["partition"])] = s.value
        elif not s.labels:
            found.setdefault(s.name, {})[-1] = s.value
    return found


@pytest.mark.parametrize("engine", sorted(ENGINE_ARGS))
def test_lag_is_served_while_the_first_batch_is_held_up(
    dirs: dict[str, Path],
    start_app: Any,
    kafka_bootstrap: str,
    pg_dsn: str,
    pg_table: str,
    engine: str,
) -> None:
    topic = fresh_topic("lag-start")
    send(kafka_bootstrap, topic, [f"w{n} x" for n in range(40)])
    ends = end_offsets(kafka_bootstrap, topic)
    port = free_port()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the sink's totals table
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (word text PRIMARY KEY, count bigint NOT NULL,"
                " last_batch_ms bigint NOT NULL)"
            ).format(sql.Identifier(pg_table))
        )
    lock = psycopg.connect(pg_dsn)
    try:
        lock.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(sql.Identifier(pg_table)))
        config = postgres_config(dirs["checkpoint"].parent, pg_dsn)
        app = start_app(
            "--config", str(config),
            *kafka_args(dirs, kafka_bootstrap, topic, *ENGINE_ARGS[engine]),
            "--sink", "postgres", "--postgres-table", pg_table,
            "--starting-offsets", "earliest", "--metrics-port", str(port),
        )  # fmt: skip

        def lagging() -> dict[str, dict[int, float]] | None:
            now = served(port, topic)
            seconds = now.get("streaming_app_kafka_lag_seconds", {})
            return now if len(seconds) == len(ends) else None

        seen = wait_for("lag in seconds served for every partition", lagging, 150, app)
        # Served before any batch completed: from where the run starts (offset 0).
        assert seen.get("streaming_app_batches_total", {}).get(-1, 0) == 0, seen
        assert seen["streaming_app_kafka_processed_offset"] == dict.fromkeys(ends, 0), seen
        assert seen["streaming_app_kafka_lag_records"] == ends, seen
        assert all(s >= 0 for s in seen["streaming_app_kafka_lag_seconds"].values()), seen
        read_at = seen["streaming_app_kafka_lag_read_timestamp_seconds"][-1]
        assert abs(read_at - time.time()) < 60, seen
    finally:
        lock.rollback()
        lock.close()
    wait_for(
        "the backlog processed once the table is unlocked",
        lambda: (
            served(port, topic).get("streaming_app_kafka_lag_records") == dict.fromkeys(ends, 0)
        ),
        120,
        app,
    )
    assert app.terminate() == 0, app.log()[-3000:]
