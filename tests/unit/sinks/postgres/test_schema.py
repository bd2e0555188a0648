"""The postgres sink's checks of the database and its tables, without a server."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from streaming_app.errors import EXIT_USAGE, SinkError, SinkSetupError
from streaming_app.sinks.postgres import connection as pg_sink
from streaming_app.sinks.postgres import schema


def connection(server: str = "UTF8", encoding: str = "utf-8", column: str | None = None) -> Any:
    """A connection to a database of the given encoding whose count column has `column`."""
    conn = mock.MagicMock(name="connection")
    conn.info.dbname = "stats"
    conn.info.encoding = encoding
    conn.info.parameter_status.side_effect = {
        "server_encoding": server,
        "client_encoding": "LATIN1",
    }.get
    conn.execute.return_value.fetchone.return_value = None if column is None else (column,)
    return conn


@pytest.mark.parametrize("server", ["UTF8", "SQL_ASCII"])
def test_databases_that_hold_every_word_are_accepted(server: str) -> None:
    schema.check_encoding(connection(server), "wc")


@pytest.mark.parametrize("server", ["LATIN1", "EUC_JP", "WIN1252"])
def test_other_encodings_are_refused_in_one_line_that_says_why(server: str) -> None:
    with pytest.raises(SinkSetupError) as raised:
        schema.check_encoding(connection(server), "wc")
    message = str(raised.value)
    assert f"database stats (table wc) has encoding {server}" in message
    assert "ENCODING 'UTF8'" in message and "\n" not in message
    assert raised.value.exit_code == EXIT_USAGE  # a setting to change: supervise stops
    assert isinstance(raised.value, SinkError)


def test_a_connection_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(SinkSetupError, match="client encoding LATIN1, not UTF8"):
        schema.check_encoding(connection("SQL_ASCII", encoding="ascii"), "wc")


def test_a_count_column_of_the_other_job_is_refused_and_a_missing_one_is_not() -> None:
    schema.check_value_type(connection(column=None), "s.wc", "bigint")
    schema.check_value_type(connection(column="bigint"), "s.wc", "bigint")
    with pytest.raises(SinkSetupError, match=r"s\.wc has a numeric count column, but this job"):
        schema.check_value_type(connection(column="numeric"), "s.wc", "bigint")


def test_every_connection_asks_for_utf8_whatever_the_dsn_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connect = mock.MagicMock(name="psycopg.connect")
    monkeypatch.setattr(pg_sink.psycopg, "connect", connect)
    monkeypatch.setenv("PGCLIENTENCODING", "LATIN1")
    pg_sink.connect({"host": "h", "client_encoding": "SQL_ASCII"}, 3)
    assert connect.call_args.kwargs["client_encoding"] == "UTF8"
    assert connect.call_args.kwargs["host"] == "h"
