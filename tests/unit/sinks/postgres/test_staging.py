"""The staging tasks without Spark or a server: their failures sorted in one line, the
driver's reading of a failed job, and what a task is given (no password shown)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from streaming_app.errors import SinkError, SinkSetupError
from streaming_app.sinks.postgres import staging
from streaming_app.sinks.postgres.connection import PostgresUnavailableError, with_environment
from streaming_app.sinks.postgres.staging import StagingError, StagingTarget, run_staging
from streaming_app.sinks.postgres.writer import PostgresWriter

SECRET = "s3cret-pw"


def target() -> StagingTarget:
    return StagingTarget({"host": "db", "password": SECRET}, ("wc_staging",), "wc", 1000)


def failing(error: BaseException) -> Any:
    def connect(*args: Any) -> Any:
        raise error

    return connect


def test_a_target_shows_no_password() -> None:
    assert SECRET not in repr(target())


def test_the_environment_fills_in_what_the_dsn_leaves_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGPASSWORD", SECRET)
    monkeypatch.setenv("PGUSER", "from-env")
    filled = with_environment({"host": "db", "user": "from-dsn"})
    assert filled["password"] == SECRET and filled["user"] == "from-dsn"
    writer = PostgresWriter("host=db dbname=test", "public.wc")
    shipped = writer.staging_target(5000, window=True)
    assert shipped.params["password"] == SECRET  # the executors lack PGPASSWORD
    assert (shipped.staging, shipped.sink, shipped.batch_ms) == (
        ("public", "wc_staging"),
        "public.wc_window",
        5000,
    )


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("connection to server failed: Connection refused", "retry"),
        (f'FATAL:  password authentication failed for user "app" ({SECRET})', "SinkSetupError"),
        ('FATAL:  database "nope" does not exist', "SinkSetupError"),
    ],
)
def test_a_tasks_failure_says_what_it_is_in_one_line_without_the_password(
    monkeypatch: pytest.MonkeyPatch, message: str, kind: str
) -> None:
    monkeypatch.setattr(staging, "connect", failing(psycopg.OperationalError(message)))
    with pytest.raises(StagingError) as raised:
        list(staging.stage_partition(target(), 3, iter([("a", 1)])))
    text = str(raised.value)
    assert text.startswith(f"{staging.MARK} {kind}: ")
    assert SECRET not in text and "\n" not in text


class FailedJob:
    """An RDD whose job fails with the text of a Spark failure around a task's error."""

    def __init__(self, text: str) -> None:
        self.text = text

    def mapPartitionsWithIndex(self, function: Any) -> FailedJob:  # noqa: N802 (Spark's)
        return self

    def collect(self) -> Any:
        raise RuntimeError(f"Job aborted due to stage failure:\n{self.text}\n\tat org.apache")


def test_the_driver_sorts_a_failed_staging_job() -> None:
    retry = f"streaming_app.sinks.postgres.staging.StagingError: {staging.MARK} retry: refused"
    with pytest.raises(PostgresUnavailableError, match="staging: refused"):
        run_staging(FailedJob(retry), target(), "sink wc")  # type: ignore[arg-type]
    setup = f"StagingError: {staging.MARK} SinkSetupError: bad password; check the user"
    with pytest.raises(SinkSetupError, match=r"^sink wc: bad password; check the user$"):
        run_staging(FailedJob(setup), target(), "sink wc")  # type: ignore[arg-type]
    sink = f"StagingError: {staging.MARK} SinkError: permission denied; grant"
    with pytest.raises(SinkError, match=r"^sink wc: permission denied"):
        run_staging(FailedJob(sink), target(), "sink wc")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Python worker exited"):
        run_staging(FailedJob("Python worker exited unexpectedly"), target(), "x")  # type: ignore[arg-type]
