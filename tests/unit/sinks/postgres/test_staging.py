"""The staging tasks without Spark or a server: their failures sorted in one line, the
driver's reading of a failed job, and what a task is given (no password shown)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from streaming_app.errors import SinkError, SinkSetupError
from streaming_app.sinks.postgres import staging
from streaming_app.sinks.postgres.connection import PostgresUnavailableError, with_environment
from streaming_app.sinks.postgres.staging import FrameRows, PairRows, StagingTarget, run_staging
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
def test_a_tasks_failure_is_its_result_in_one_line_without_the_password(
    monkeypatch: pytest.MonkeyPatch, message: str, kind: str
) -> None:
    monkeypatch.setattr(staging, "connect", failing(psycopg.OperationalError(message)))
    [(part, count, failure)] = staging.stage_partition(target(), 3, iter([("a", 1)]))
    assert (part, count) == (3, -1) and failure is not None
    assert failure[0] == kind
    assert SECRET not in failure[1] and "\n" not in failure[1]


class Job:
    """An RDD whose staging job returns the given task results."""

    def __init__(self, results: list[Any]) -> None:
        self.results = results

    def mapPartitionsWithIndex(self, function: Any) -> Job:  # noqa: N802 (Spark's)
        return self

    def collect(self) -> Any:
        return self.results


def rdd(results: list[Any]) -> PairRows:
    return PairRows(Job(results))  # type: ignore[arg-type]


def test_the_driver_sorts_what_the_tasks_returned() -> None:
    assert run_staging(rdd([(0, 5, None), (1, 0, None)]), target(), "x") == {0: 5, 1: 0}
    retry = [(0, 5, None), (1, -1, ("retry", "refused"))]
    with pytest.raises(PostgresUnavailableError, match="staging: refused"):
        run_staging(rdd(retry), target(), "sink wc")
    setup = [(0, -1, ("SinkSetupError", "bad password; check the user"))]
    with pytest.raises(SinkSetupError, match=r"^sink wc: bad password; check the user$"):
        run_staging(rdd(setup), target(), "sink wc")
    sink = [(0, -1, ("SinkError", "permission denied; grant"))]
    with pytest.raises(SinkError, match=r"^sink wc: permission denied"):
        run_staging(rdd(sink), target(), "sink wc")


def test_a_kept_connection_that_no_longer_answers_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Conn:
        closed = False

        def __init__(self, alive: bool) -> None:
            self.alive = alive

        def execute(self, *args: Any) -> None:
            if not self.alive:
                raise psycopg.OperationalError("server closed the connection unexpectedly")

        def close(self) -> None:
            self.closed = True

    dead, fresh = Conn(False), Conn(True)
    monkeypatch.setattr(staging, "connect", lambda *args: fresh)
    monkeypatch.setitem(staging._CONNECTIONS, "k", dead)  # type: ignore[arg-type]
    assert staging._connection(target(), "k") is fresh
    assert dead.closed and staging._CONNECTIONS["k"] is fresh
    assert staging._connection(target(), "k") is fresh  # kept while it answers


def test_a_frames_partition_reports_its_failure_as_a_row_and_an_empty_one_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pyarrow as pa

    monkeypatch.setattr(staging, "connect", failing(psycopg.OperationalError("refused")))
    empty = pa.RecordBatch.from_pydict({"part": pa.array([], pa.int32()), "k": [], "v": []})
    rows = pa.RecordBatch.from_pydict({"part": [4], "k": ["a"], "v": ["1"]})
    [result] = staging.stage_batches(target(), iter([empty, rows]))
    assert result.to_pylist() == [{"part": 4, "count": -1, "kind": "retry", "reason": "refused"}]
    assert list(staging.stage_batches(target(), iter([empty]))) == []  # no partition to stage


class Frame:
    """A DataFrame whose staging job returns the given task results, as rows."""

    def __init__(self, results: list[tuple[Any, ...]]) -> None:
        self.results = results

    def mapInArrow(self, function: Any, schema: str) -> Frame:  # noqa: N802 (Spark's)
        assert schema == staging.STAGED_SCHEMA
        return self

    def collect(self) -> Any:
        return self.results


def frame(results: list[tuple[Any, ...]]) -> FrameRows:
    return FrameRows(Frame(results))  # type: ignore[arg-type]


def test_the_driver_reads_a_frames_results_as_an_rdds() -> None:
    assert run_staging(frame([(0, 5, None, None)]), target(), "x") == {0: 5}
    failed = frame([(0, 5, None, None), (1, -1, "SinkSetupError", "bad password")])
    with pytest.raises(SinkSetupError, match=r"^sink wc: bad password$"):
        run_staging(failed, target(), "sink wc")


class Both(Job, Frame):
    """Rows that have both engines' methods: which job runs is the caller's word."""

    def __init__(self, results: list[Any]) -> None:
        self.results = results
        self.ran: list[str] = []

    def mapPartitionsWithIndex(self, function: Any) -> Both:  # noqa: N802 (Spark's)
        self.ran.append("partitions")
        return self

    def mapInArrow(self, function: Any, schema: str) -> Both:  # noqa: N802 (Spark's)
        self.ran.append("arrow")
        return self


def test_the_caller_says_which_engines_rows_it_hands_over() -> None:
    pairs, rows = Both([(0, 5, None)]), Both([(1, 2, None, None)])
    assert run_staging(PairRows(pairs), target(), "x") == {0: 5}  # type: ignore[arg-type]
    assert run_staging(FrameRows(rows), target(), "x") == {1: 2}  # type: ignore[arg-type]
    assert (pairs.ran, rows.ran) == (["partitions"], ["arrow"])
