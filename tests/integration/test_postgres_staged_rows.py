"""The postgres writer's check of the staged rows against a real server, without Spark:
rows missing at every attempt end the run with a line that says what happened.

A row trigger on the staging table that returns NULL keeps each staged row out while the
COPY reports it written: what the merge then finds is what it finds after a restart of
the server emptied the UNLOGGED table (test_postgres_staging.py empties it for real).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from streaming_app.errors import SinkError
from streaming_app.settings.rules import STAGING_SUFFIX
from streaming_app.sinks.postgres.writer import PostgresWriter, read_progress, read_totals
from tests.integration import pg_helpers

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
pg_dsn = pg_helpers.pg_dsn
pg_table = pg_helpers.pg_table


@contextmanager
def staged_rows_dropped(dsn: str, table: str) -> Iterator[None]:
    """Every row COPYed into the table's staging table is silently left out."""
    staging = sql.Identifier(table + STAGING_SUFFIX)
    function = sql.Identifier(f"drop_{table}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " RETURN NULL; END $$"
            ).format(function)
        )
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER drop_rows BEFORE INSERT ON {} FOR EACH ROW EXECUTE FUNCTION {}()"
            ).format(staging, function)
        )
        try:
            yield
        finally:
            conn.execute(sql.SQL("DROP TRIGGER drop_rows ON {}").format(staging))
            conn.execute(sql.SQL("DROP FUNCTION {}()").format(function))


def test_staged_rows_missing_at_every_attempt_end_with_what_happened(
    pg_dsn: str, pg_table: str, caplog: pytest.LogCaptureFixture
) -> None:
    with PostgresWriter(pg_dsn, pg_table) as writer:
        writer.ensure_schema()
        dropped = staged_rows_dropped(pg_dsn, pg_table)
        with dropped, caplog.at_level(logging.WARNING), pytest.raises(SinkError) as raised:
            writer.write_batch(1000, [("a", 1), ("b", 2), ("c", 3)])
        message = str(raised.value)
        staging = pg_table + STAGING_SUFFIX
        assert message == (
            f"PostgreSQL sink {pg_table}: batch_time_ms=1000: staged rows of table {pg_table} "
            "missing: 0 of the 3 rows its tasks staged are there (1 of 1 partitions short: "
            "[0]), at each of 3 attempts to stage the batch; gave up, nothing of it merged. "
            f"Something empties {staging} between staging and merge (the server restarting, "
            f"a TRUNCATE or DELETE by another session, a trigger or rule on {staging}): stop "
            "it, then start the app again; the batch is replayed from the checkpoint"
        )
        assert "staged again" not in message
        retries = [
            r.getMessage() for r in caplog.records if "Staging the batch again" in r.getMessage()
        ]
        assert [m[-len("(attempt 2 of 3)") :] for m in retries] == [
            "(attempt 2 of 3)",
            "(attempt 3 of 3)",
        ], retries
        assert read_totals(pg_dsn, pg_table) == {}  # nothing merged
        assert read_progress(pg_dsn, pg_table) is None
        # With the rows kept again, the same batch is written whole.
        assert writer.write_batch(1000, [("a", 1), ("b", 2), ("c", 3)])
    assert read_totals(pg_dsn, pg_table) == {"a": 1, "b": 2, "c": 3}
