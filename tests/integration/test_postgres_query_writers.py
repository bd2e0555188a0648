"""The structured engine's totals and window queries write PostgreSQL at the same time, each
on a connection of its own: one's transaction never holds up, or swallows, the other's.

Driver side against a real server, without Spark: the writers the two queries' foreachBatch
functions get (`writer_for`), the totals' merge held inside its transaction (a row trigger
waiting for an advisory lock the test holds) while the window's write runs and commits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from streaming_app.sinks.postgres.stream import WINDOW, configure_postgres, writer_for
from streaming_app.sinks.postgres.writer import read_progress, read_totals
from tests.integration.harness import wait_for
from tests.integration.test_postgres_staging import rows_held, sessions_waiting

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def runtime(pg_dsn: str) -> Iterator[None]:
    """The driver's postgres runtime pointed at the test server; its writers closed after."""
    configure_postgres(pg_dsn, threading.Event())
    yield
    configure_postgres(None, threading.Event())


def in_thread(work: Callable[[], bool]) -> tuple[threading.Thread, list[bool]]:
    """`work` started in a thread of its own (as a query's micro-batch runs); its result."""
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(work()), daemon=True)
    thread.start()
    return thread, results


def test_the_window_query_commits_while_the_totals_query_is_inside_its_transaction(
    pg_dsn: str, pg_schema: str, runtime: None
) -> None:
    table = f"{pg_schema}.wc"
    totals, window = writer_for(table), writer_for(table, query=WINDOW)
    with rows_held(pg_dsn, table):
        merging, merged = in_thread(lambda: totals.write_batch(1000, [("a", 1), ("b", 2)]))
        wait_for(
            "the totals' merge held inside its transaction",
            lambda: sessions_waiting(pg_dsn, "streaming-app", "advisory"),
            pause=0.05,
        )
        writing, written = in_thread(lambda: window.write_window(2000, [("w", 3)]))
        writing.join(timeout=30)
        assert written == [True], (
            "the window's write did not commit while the totals' transaction was open: the "
            "two queries share a connection"
        )
        # Committed on its own: another session sees it while the totals' merge is held.
        assert read_totals(pg_dsn, table, window=True) == {"w": 3}
        assert read_progress(pg_dsn, table) is None
    merging.join(timeout=30)
    assert merged == [True]
    assert read_totals(pg_dsn, table) == {"a": 1, "b": 2}
    assert read_totals(pg_dsn, table, window=True) == {"w": 3}
