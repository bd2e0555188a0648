"""The benchmarks' peers write what they say: Spark's own word count writing PostgreSQL
(bench/peers/spark_peer.py `--app-postgres`, the latency benchmark's peer of the postgres
sink) leaves each micro-batch's totals in the table, on real Spark and a real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from bench.peers.spark_peer import create_table, postgres_batch
from tests.integration.spark_local import local_session


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with local_session("test-bench-peers") as session:
        yield session


def test_the_postgres_peer_upserts_each_micro_batchs_totals(
    spark: Any, pg_dsn: str, pg_table: str
) -> None:
    create_table(pg_dsn, pg_table)
    write = postgres_batch(pg_dsn, pg_table)
    schema = "key string, total long"
    write(spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], schema).repartition(2), 0)
    # Three partitions for two rows: one writes nothing.
    write(spark.createDataFrame([("b", 5), ("d", 1)], schema).repartition(3), 1)
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT word, count FROM {}").format(sql.Identifier(pg_table))
        ).fetchall()
    assert dict(rows) == {"a": 1, "b": 5, "c": 3, "d": 1}
