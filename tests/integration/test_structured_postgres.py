"""`run --engine structured --sink postgres` with real Spark and a real PostgreSQL: exact
totals while files keep arriving, across kill -9 of the driver's process group (twice) and
restarts; the progress row names the last micro-batch; a micro-batch PostgreSQL has but
Spark did not commit is replayed and skipped; a table another run wrote meanwhile gets every
total (the state's) in the next micro-batch; no password of the DSN in the checkpoint or the
logs; the keyed sum exact in a numeric column."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from streaming_app.errors import SinkError
from streaming_app.sinks.postgres.writer import read_progress, read_totals
from streaming_app.structured.query_log import parse_batch_timestamp
from tests.integration.batch_waits import kill_mid_batch
from tests.integration.harness import (
    App,
    EveryPause,
    drop_file,
    make_text,
    truth,
    wait_for,
)
from tests.integration.kafka_helpers import end_offsets, fresh_topic, send
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED
from tests.integration.pg_helpers import postgres_config, wait_for_pg_totals

pytestmark = pytest.mark.timeout(900)

SECRET = "pg-pw-9c41e7"
SKIPPED = r"batch_id=(\d+) batch_time_ms=\d+: \d+ totals changed, postgres: already written"


def structured_pg_args(dirs: dict[str, Path], dsn: str, table: str, *extra: str) -> list[str]:
    """A run of the structured engine with the postgres sink only (the files source unless
    `extra` says otherwise)."""
    config = postgres_config(dirs["checkpoint"].parent, dsn)  # the DSN never on a command line
    return [
        "--engine", "structured", "--config", str(config),
        "--source", "files", "--input-dir", str(dirs["input"]),
        "--checkpoint-dir", str(dirs["checkpoint"]),
        "--sink", "postgres", "--postgres-table", table,
        "--batch-interval", "1", "--spark-conf", "spark.ui.enabled=false", *extra,
    ]  # fmt: skip


class Feeder(EveryPause):
    """Moves a new file of random words into the input directory every `pause` seconds."""

    def __init__(self, input_dir: Path, rng: random.Random, pause: float) -> None:
        super().__init__(pause)
        self.input_dir, self.rng = input_dir, rng

    def step(self) -> list[str]:
        text = make_text(self.rng, 20)
        drop_file(self.input_dir, f"f{len(self.written):04d}.txt", text.encode())
        return [text]


def with_unchecked_password(dsn: str) -> str:
    """The DSN with a password if it has none: the local test server (trust) ignores it,
    so a test can look for it in the checkpoint and the logs."""
    if conninfo_to_dict(dsn).get("password"):
        return dsn
    return make_conninfo(dsn, password=SECRET)


def progress_of(dsn: str, table: str) -> dict[str, Any] | None:
    """The progress row, None before the sink created its tables."""
    try:
        return read_progress(dsn, table)
    except SinkError:
        return None


def recorded_batch(dsn: str, table: str) -> int:
    progress = progress_of(dsn, table)
    return -1 if progress is None else int(progress["source_position"]["batch_id"])


def wait_for_batch(dsn: str, table: str, batch_id: int, app: App, timeout: float = 120) -> int:
    """Wait until the progress row records micro-batch `batch_id` or a later one."""
    found = -1

    def recorded() -> bool:
        nonlocal found
        found = recorded_batch(dsn, table)
        return found >= batch_id

    what = f"micro-batch {batch_id} recorded"
    wait_for(what, recorded, timeout, app, detail=lambda: f"micro-batch {found} recorded")
    return found


def last_committed(checkpoint: Path) -> int:
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def test_exact_while_files_arrive_across_kill_9_and_restarts(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    table = f"{pg_schema}.word_totals"
    args = structured_pg_args(dirs, with_unchecked_password(pg_dsn), table)
    rng = random.Random(31)
    drop_file(dirs["input"], "before-start.txt", make_text(rng, 20).encode())
    feeder = Feeder(dirs["input"], rng, pause=0.4)
    feeder.written.append((dirs["input"] / "before-start.txt").read_text())
    app = start_app(*args)
    app.wait_for_log(QUERY_STARTED)
    feeder.start()
    try:
        for kill in range(2):
            # Kill -9 mid-batch (checked: a micro-batch planned, not committed), the
            # files arriving on their own.
            recorded = wait_for_batch(pg_dsn, table, recorded_batch(pg_dsn, table) + 2, app)
            kill_mid_batch(app, dirs["checkpoint"], lambda: None)
            feeder.wait_steps(2)  # files keep arriving while it is down
            app = start_app(*args)
            app.wait_for_log(QUERY_RECOVERED)
            assert "Started new query" not in app.log(), kill
            wait_for_batch(pg_dsn, table, recorded + 1, app)
        wait_for_batch(pg_dsn, table, recorded_batch(pg_dsn, table) + 1, app)  # and on
    finally:
        texts = feeder.stop()
    wait_for_pg_totals(pg_dsn, table, truth(texts), app)
    assert app.terminate() == 0
    assert "Traceback" not in app.log()
    assert read_totals(pg_dsn, table) == truth(texts)

    # The progress row records the last micro-batch: its id, its time in the offsets log,
    # the query (the id in the checkpoint's metadata).
    checkpoint = dirs["checkpoint"]
    last = last_committed(checkpoint)
    query = json.loads((checkpoint / "metadata").read_text())["id"]
    progress = read_progress(pg_dsn, table)
    assert progress is not None
    assert progress["source_position"] == {"context": query, "batch_id": last}
    assert progress["batch_ms"] == parse_batch_timestamp(
        (checkpoint / "offsets" / str(last)).read_bytes()
    )

    # A kill after PostgreSQL's commit and before Spark's: Spark runs the micro-batch
    # again with the same files; the sink skips it.
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    replay = start_app(*args)
    assert int(replay.wait_for_log(SKIPPED).group(1)) == last
    assert read_totals(pg_dsn, table) == truth(texts)
    texts.append(make_text(rng, 20))
    drop_file(dirs["input"], "after-replay.txt", texts[-1].encode())
    wait_for_pg_totals(pg_dsn, table, truth(texts), replay)
    assert replay.terminate() == 0
    progress = read_progress(pg_dsn, table)
    assert progress is not None and progress["source_position"]["batch_id"] == last + 1

    # The table written by another run meanwhile: the next micro-batch writes every total
    # (read from the state), replacing the table's rows, as the DStream sink does after a gap.
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET source_position = %s::jsonb").format(
                sql.Identifier(pg_schema, "word_totals_progress")
            ),
            ['{"context": "another-run"}'],
        )
        conn.execute(
            sql.SQL("INSERT INTO {} (word, count, last_batch_ms) VALUES ('stranger', 7, 1)").format(
                sql.Identifier(pg_schema, "word_totals")
            )
        )
    texts.append(make_text(rng, 20))
    drop_file(dirs["input"], "after-another-run.txt", texts[-1].encode())
    gap = start_app(*args)
    gap.wait_for_log(
        rf"batch_id={last + 2} batch_time_ms=\d+: \d+ totals changed, postgres: every total"
    )
    wait_for_pg_totals(pg_dsn, table, truth(texts), gap)  # the stranger's row is gone
    assert gap.terminate() == 0
    progress = read_progress(pg_dsn, table)
    assert progress is not None and progress["source_position"]["context"] == query
    for path in [*dirs["checkpoint"].rglob("*"), *tmp_path.glob("run*.*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


HEADER = "region,amount"


def test_keyed_sum_exact_in_a_numeric_column(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_schema: str
) -> None:
    table = f"{pg_schema}.sums"
    app = start_app(
        *structured_pg_args(dirs, pg_dsn, table), "--job", "keyed-sum", "--csv-fields", HEADER,
        "--key-field", "region", "--value-field", "amount",
    )  # fmt: skip
    app.wait_for_log(QUERY_STARTED)
    drop_file(dirs["input"], "s1.csv", f"{HEADER}\neu,0.1\nus,10\neu,0.2\n".encode())
    wait_for_pg_totals(pg_dsn, table, {"eu": Decimal("0.3"), "us": Decimal(10)}, app)
    drop_file(dirs["input"], "s2.csv", b"eu,123456789012345678.000000000001\nus,-0.5\n")
    expected = {"eu": Decimal("123456789012345678.300000000001"), "us": Decimal("9.5")}
    wait_for_pg_totals(pg_dsn, table, expected, app)
    assert app.terminate() == 0


def test_kafka_micro_batches_record_their_end_offsets(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_schema: str, kafka_bootstrap: str
) -> None:
    topic = fresh_topic("sspg")
    table = f"{pg_schema}.word_totals"
    sent = make_text(random.Random(37), 200).splitlines()
    send(kafka_bootstrap, topic, sent, partitions=3)
    kafka = ["--source", "kafka", "--bootstrap-servers", kafka_bootstrap, "--topics", topic]
    app = start_app(*structured_pg_args(dirs, pg_dsn, table, *kafka, "--batch-interval", "2"))
    app.wait_for_log(QUERY_STARTED)
    wait_for_pg_totals(pg_dsn, table, truth(sent), app)
    assert app.terminate() == 0
    progress = read_progress(pg_dsn, table)
    assert progress is not None
    ends = end_offsets(kafka_bootstrap, topic)
    assert len(ends) == 3
    # Spark's offsets log and the row agree, in the DStream engine's form.
    assert progress["source_position"]["kafka"] == [[topic, p, ends[p]] for p in sorted(ends)]
    assert progress["source_position"]["batch_id"] == last_committed(dirs["checkpoint"])
