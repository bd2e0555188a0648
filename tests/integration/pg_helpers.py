"""PostgreSQL fixtures for the integration tests: a reachable server and fresh table names."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from streaming_app.errors import SinkError
from streaming_app.settings.rules import PROGRESS_SUFFIX, STAGING_SUFFIX, WINDOW_SUFFIX
from streaming_app.sinks.postgres.writer import read_totals, redact_dsn
from tests.integration.harness import App, wait_for_totals_of

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def ci() -> bool:
    """Whether this is a CI run, where a missing service fails instead of skipping."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """TEST_POSTGRES_DSN or the local server; skip if unreachable (fail in CI)."""
    dsn = os.environ.get("TEST_POSTGRES_DSN") or DEFAULT_DSN
    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.Error as exc:
        message = f"PostgreSQL not reachable at {redact_dsn(dsn)}: {str(exc).splitlines()[0]}"
        if ci():
            pytest.fail(message)
        pytest.skip(message)
    return dsn


@pytest.fixture
def pg_table(pg_dsn: str) -> Iterator[str]:
    """A table name no other test uses; the sink's tables are dropped at the end."""
    table = f"wc_{uuid.uuid4().hex[:12]}"
    yield table
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP TABLE IF EXISTS {}, {}, {}, {}").format(
                sql.Identifier(table),
                sql.Identifier(table + PROGRESS_SUFFIX),
                sql.Identifier(table + WINDOW_SUFFIX),
                sql.Identifier(table + STAGING_SUFFIX),
            )
        )


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A schema no other test uses, created empty; dropped with all it holds at the end."""
    schema = f"sst_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def fresh_database(dsn: str, encoding: str) -> Iterator[str]:
    """A database no other test uses, of `encoding` with the C locale (what initdb makes
    under LC_ALL=C); yields its DSN, and drops it at the end, connections and all."""
    name = f"sdb_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING {} LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
            ).format(sql.Identifier(name), sql.Literal(encoding))
        )
    try:
        yield psycopg.conninfo.make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def postgres_config(tmp_path: Path, dsn: str) -> Path:
    """A config file with the DSN: credentials never go on the command line."""
    path = tmp_path / "postgres.ini"
    path.write_text(f"[postgres]\npostgres_dsn = {dsn}\n", encoding="utf-8")
    return path


def wait_for_pg_totals(
    dsn: str, table: str, expected: dict[str, Any], app: App | None = None, timeout: float = 120
) -> dict[str, Any]:
    """Poll the sink's table until it holds exactly `expected`; fail with the last seen."""

    def read() -> dict[str, Any]:
        try:
            return read_totals(dsn, table)
        except SinkError:  # not created yet
            return {}

    return wait_for_totals_of(f"the expected totals in {table}", read, expected, app, timeout)
