"""The postgres sink's tables: created if missing, refused if they or the database do not suit.

Runs on the driver, inside the writer's connection (no Spark here). The checks raise
SinkSetupError: a setting must change (postgres_table, postgres_dsn), and restarting
cannot help, so the run ends with exit 2 and one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg import sql

from streaming_app.errors import SinkSetupError
from streaming_app.settings.rules import DEFAULT_FILLFACTOR, STAGING_SUFFIX, WINDOW_SUFFIX

if TYPE_CHECKING:
    import psycopg

# Every schema creation of the sink takes the same lock, so `t` and `public.t` do too (its
# text is that of older versions, which take it too).
SCHEMA_LOCK = "streaming_app.sinks.postgres.writer schema"
# The client encoding of every connection of the sink: words are any Unicode text. A UTF8
# database stores them as they are; a SQL_ASCII one (initdb under LC_ALL=C) stores and
# returns the bytes it is given unchecked, so UTF-8 text goes in and comes back unchanged.
CLIENT_ENCODING = "UTF8"
# The server encodings that can hold every word; any other cannot store some of them.
WHOLE_UNICODE = ("UTF8", "SQL_ASCII")


def create_schema(
    conn: psycopg.Connection[Any],
    table: str,
    totals: sql.Identifier,
    progress: sql.Identifier,
    value_type: sql.SQL,
    staging: sql.Identifier,
    fillfactor: int = DEFAULT_FILLFACTOR,
) -> None:
    """Create the totals, progress and staging tables if missing, then check they suit
    this job.

    The totals table is created with `fillfactor` (per cent of each page its inserts
    fill): a batch updates most of its rows, and with room on the row's page PostgreSQL
    makes the new version a heap-only tuple, which touches no index (a batch's merge of
    85,000 of 100,000 rows about a third faster at 50 than at 100: docs/postgres.md). An
    existing table keeps its own.

    Two processes creating the same table at once can both pass IF NOT EXISTS and collide
    on pg_type; the transaction-scoped advisory lock serialises them. The staging table
    (staging.py) is UNLOGGED: what it holds lives from a batch's staging to its merge, and
    a crash of the server that empties it is caught by the merge's count check.
    """
    check_encoding(conn, table)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [SCHEMA_LOCK])
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (word text PRIMARY KEY,"
                " count {} NOT NULL, last_batch_ms bigint NOT NULL) WITH (fillfactor = {})"
            ).format(totals, value_type, sql.Literal(int(fillfactor)))
        )
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (sink text PRIMARY KEY,"
                " batch_ms bigint NOT NULL, source_position jsonb,"
                " rows_written bigint NOT NULL,"
                " updated_at timestamptz NOT NULL DEFAULT now())"
            ).format(progress)
        )
        conn.execute(
            sql.SQL(
                "CREATE UNLOGGED TABLE IF NOT EXISTS {} (sink text NOT NULL,"
                " batch_ms bigint NOT NULL, part integer NOT NULL, word text NOT NULL,"
                " count {} NOT NULL)"
            ).format(staging, value_type)
        )
        for name in (table, table + WINDOW_SUFFIX, table + STAGING_SUFFIX):
            check_value_type(conn, name, value_type.as_string(None))


def create_window_table(
    conn: psycopg.Connection[Any], window: sql.Identifier, value_type: sql.SQL
) -> None:
    """Create `<table>_window` if missing, inside the caller's transaction (which holds
    SCHEMA_LOCK); its value type was checked at start-up with the totals table's."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (word text PRIMARY KEY,"
            " count {} NOT NULL, window_end_ms bigint NOT NULL)"
        ).format(window, value_type)
    )


def check_encoding(conn: psycopg.Connection[Any], table: str) -> None:
    """The database can hold every word, and this connection exchanges text as UTF-8."""
    server = conn.info.parameter_status("server_encoding") or "unknown"
    database = conn.info.dbname
    if server not in WHOLE_UNICODE:
        raise SinkSetupError(
            f"PostgreSQL database {database} (table {table}) has encoding {server}, which "
            "cannot store every word (only UTF8 and SQL_ASCII can); point postgres_dsn at a "
            "database created with ENCODING 'UTF8'"
        )
    if conn.info.encoding != "utf-8":  # the sink sets it; a server that ignored it
        client = conn.info.parameter_status("client_encoding")
        raise SinkSetupError(
            f"PostgreSQL connection for table {table} has client encoding {client}, not "
            f"{CLIENT_ENCODING}; remove what sets it from postgres_dsn and the server's settings"
        )


def check_value_type(conn: psycopg.Connection[Any], table: str, wanted: str) -> None:
    """An existing table made by the other job would round sums or refuse them."""
    schema, _, name = table.rpartition(".")
    row = conn.execute(
        "SELECT data_type FROM information_schema.columns WHERE table_schema ="
        " coalesce(%s, current_schema()) AND table_name = %s AND column_name = 'count'",
        [schema or None, name],
    ).fetchone()
    if row is not None and row[0] != wanted:
        raise SinkSetupError(
            f"PostgreSQL table {table} has a {row[0]} count column, but this job writes "
            f"{wanted} (word counts: bigint; keyed-sum: numeric); use another postgres_table "
            "for this job"
        )
