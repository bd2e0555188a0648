"""The move off DStreams and back, as docs/moving-off-dstreams.md describes it, on a real
broker, real Spark and a real PostgreSQL while a producer keeps writing: a DStream run
killed with kill -9, moved to the structured engine from its snapshot, that query killed
with kill -9 and restarted with the same command, killed again after a snapshot of its
own, and moved back to a new DStream checkpoint from it. Each stage writes the files sink
and the postgres sink to outputs of its own; the last stage's totals are exact in both."""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from streaming_app.settings.rules import PROGRESS_SUFFIX
from tests.integration.conftest import kafka_args
from tests.integration.harness import cli_totals, truth, wait_for_totals
from tests.integration.kafka_helpers import fresh_topic, send
from tests.integration.pg_helpers import postgres_config
from tests.integration.test_structured_kafka import Producer, lines_of
from tests.integration.test_structured_postgres import wait_for_pg_totals
from tests.integration.test_structured_snapshots import wait_for_snapshots

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def tables(pg_dsn: str) -> Iterator[list[str]]:
    """Three postgres_table names no other test uses, one per stage; dropped at the end."""
    names = [f"mv{stage}_{uuid.uuid4().hex[:10]}" for stage in range(3)]
    yield names
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
                    sql.Identifier(name), sql.Identifier(name + PROGRESS_SUFFIX)
                )
            )


# `slow` (207 s in CI of 5036512); CI moves between the engines in test_structured_snapshots.py.
@pytest.mark.slow
def test_dstreams_to_structured_and_back_exact_in_files_and_postgres(
    dirs: dict[str, Path],
    start_app: Any,
    kafka_bootstrap: str,
    pg_dsn: str,
    tables: list[str],
    tmp_path: Path,
) -> None:
    rng = random.Random(43)
    topic = fresh_topic("move")
    sent = lines_of(rng, 300)
    send(kafka_bootstrap, topic, sent, partitions=3)
    config = postgres_config(tmp_path, pg_dsn)  # the DSN never on a command line
    stages = [tmp_path / f"stage{n}" for n in range(3)]

    def args(stage: int, *extra: str) -> list[str]:
        """Stage `stage`'s command: its own checkpoint, files output and table."""
        return [
            *kafka_args(dirs, kafka_bootstrap, topic, "--snapshot-interval", "4"),
            "--config", str(config), "--sink", "postgres", "--postgres-table", tables[stage],
            "--checkpoint-dir", str(stages[stage] / "checkpoint"),
            "--output-dir", str(stages[stage] / "output"), *extra,
        ]  # fmt: skip

    producer = Producer(kafka_bootstrap, topic, random.Random(11), pause=0.7)
    producer.start()
    try:
        # 1. DStreams, killed after two snapshots.
        dstream = start_app(*args(0))
        dstream.wait_for_log(r"Started new streaming context")
        wait_for_snapshots(dstream, 2)
        dstream.kill9()

        # 2. Moved to the structured engine; killed after micro-batch 1, restarted with the
        # same command (recovered, not seeded again), killed after a snapshot of its own.
        move = args(
            1, "--engine", "structured", "--restore-from-snapshot", str(stages[0] / "checkpoint")
        )
        structured = start_app(*move)
        structured.wait_for_log(r"Seeding the new query from snapshot \S+ \(dstream engine\)")
        structured.wait_for_log(r"batch_id=1 batch_time_ms=\d+: \d+ totals changed", timeout=180)
        structured.kill9()
        structured = start_app(*move)
        structured.wait_for_log(r"Recovered query id=\S+ from checkpoint")
        assert "already seeded from" in structured.log()
        wait_for_snapshots(structured, 1, timeout=180)
        structured.kill9()

        # 3. Back to DStreams, from the structured engine's newest snapshot.
        back = start_app(*args(2, "--restore-from-snapshot", str(stages[1] / "checkpoint")))
        seeded = back.wait_for_log(r"Seeding the new context from snapshot (\S+):").group(1)
        assert seeded.startswith(str(stages[1] / "checkpoint" / "snapshots" / "snapshot-"))
        manifest = json.loads((Path(seeded) / "manifest.json").read_text())
        assert manifest["engine"] == "structured" and manifest["words"] > 0
        back.wait_for_log(r"Started new streaming context|Recovered streaming context")
        time.sleep(3)
    finally:
        sent += producer.stop()
    expected = truth(sent)
    wait_for_totals(stages[2] / "output", expected, back, timeout=180)
    wait_for_pg_totals(pg_dsn, tables[2], expected, back)
    back.wait_caught_up()
    assert back.terminate() == 0
    assert cli_totals(tmp_path, stages[2] / "output", "totals") == expected
    for app in (dstream, structured, back):
        assert "Traceback" not in app.log()
