"""The postgres output operation's start-up check, without a server or Spark."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from streaming_app.errors import SinkSetupError
from streaming_app.settings.loading import load_config
from streaming_app.sinks.postgres import stream
from streaming_app.sinks.postgres.writer import PostgresUnavailableError, PostgresWriter


@pytest.fixture(autouse=True)
def _runtime() -> Any:
    stream.configure_postgres("postgresql://u@127.0.0.1:5999/test", threading.Event())
    yield
    stream.configure_postgres(None, threading.Event())


def fail_with(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> list[bool]:
    """Make every writer's one-attempt schema check raise `error`; records the retry flags."""
    calls: list[bool] = []

    def ensure_schema(self: PostgresWriter, retry: bool = True) -> None:
        calls.append(retry)
        raise error

    monkeypatch.setattr(PostgresWriter, "ensure_schema", ensure_schema)
    return calls


def test_a_table_that_does_not_suit_the_job_ends_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = fail_with(monkeypatch, SinkSetupError("PostgreSQL table wc has a text count column"))
    with pytest.raises(SinkSetupError, match="wc has a text count column"):
        stream.check_tables("wc")
    assert calls == [False]  # one attempt, no retries before Spark starts


def test_an_unreachable_server_at_start_is_a_warning_and_the_batches_wait(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fail_with(monkeypatch, PostgresUnavailableError("Connection refused"))
    with caplog.at_level(logging.WARNING):
        stream.check_tables("wc")
    assert "PostgreSQL at 127.0.0.1:5999 is unreachable at start (Connection refused)" in (
        caplog.text
    )
    assert "the first batch waits for it" in caplog.text


def test_the_configured_fillfactor_reaches_every_writer() -> None:
    assert stream._new_writer("wc", numeric=False).fillfactor == 50
    stream.configure_postgres(None, threading.Event(), None, 70)
    assert stream._new_writer("wc", numeric=True).fillfactor == 70


def test_a_runs_start_gives_its_settings_to_the_writers_then_checks_its_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Either engine's start (prepare_postgres): the config's DSN, limit and fillfactor
    reach the writers before the table is checked, with the job's value type."""
    checked: list[tuple[str, bool, int]] = []

    def check_tables(table: str, numeric: bool = False) -> None:
        checked.append((table, numeric, stream._new_writer(table, numeric).fillfactor))

    monkeypatch.setattr(stream, "check_tables", check_tables)
    config = load_config(
        env={},
        cli={
            "checkpoint_dir": "/tmp/unused",
            "job": "keyed-sum",
            "csv_fields": "k,v",
            "key_field": "k",
            "value_field": "v",
            "postgres_table": "sums",
            "postgres_dsn": "postgresql://u@127.0.0.1:5998/db",
            "postgres_give_up_after": "30",
            "postgres_fillfactor": "80",
        },
    )
    stop = threading.Event()
    stream.prepare_postgres(config, stop)
    assert checked == [("sums", True, 80)]
    assert (stream._RUNTIME.dsn, stream._RUNTIME.stop, stream._RUNTIME.give_up_after) == (
        "postgresql://u@127.0.0.1:5998/db",
        stop,
        30.0,
    )
