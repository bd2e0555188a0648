"""The postgres sink's tables read back: every total (or the window) and the progress row."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql

from streaming_app.settings.rules import WINDOW_SUFFIX
from streaming_app.sinks.postgres.connection import connect, identifiers, parse_dsn, redact_dsn
from streaming_app.sinks.postgres.failures import classify, secrets_of


def _query(dsn: str, table: str, query: sql.Composed, params: list[Any]) -> list[tuple[Any, ...]]:
    """The rows of one query on a new connection; any failure is a SinkError."""
    conninfo = parse_dsn(dsn)
    try:
        with connect(conninfo, 10) as conn:
            return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        reason, hint, error = classify(exc, secrets_of(conninfo))
        raise error(
            f"cannot read PostgreSQL sink {table} at {redact_dsn(dsn)}: {reason}; "
            f"{hint or 'is the server up and reachable?'}"
        ) from exc


def read_totals(dsn: str, table: str, window: bool = False) -> dict[str, Any]:
    """Every word's total in the sink's table (or its count in the `_window` table)."""
    totals, _ = identifiers(table, WINDOW_SUFFIX if window else "")
    rows = _query(dsn, table, sql.SQL("SELECT word, count FROM {}").format(totals), [])
    return {str(word): count if isinstance(count, Decimal) else int(count) for word, count in rows}


def read_progress(dsn: str, table: str) -> dict[str, Any] | None:
    """The sink's progress row (batch_ms, source_position, rows_written, updated_at), if any."""
    _, progress = identifiers(table)
    query = sql.SQL(
        "SELECT batch_ms, source_position, rows_written, updated_at FROM {} WHERE sink = %s"
    ).format(progress)
    rows = _query(dsn, table, query, [table])
    if not rows:
        return None
    return dict(
        zip(("batch_ms", "source_position", "rows_written", "updated_at"), rows[0], strict=True)
    )
