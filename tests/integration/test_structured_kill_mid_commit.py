"""A structured kill -9 between a micro-batch's offsets log entry and its commit, landed
there by a real mechanism, not by timing: the driver's stdout is a pipe that nobody reads
(a stalled log collector), filled to the brim, so the console sink's line, written after the
postgres sink committed the micro-batch, blocks the driver with `offsets/N` written and
`commits/N` not. Killed there, with records sent while it is down, the restarted query runs
micro-batch N again on the Kafka range its offsets log entry holds (not one record more);
the postgres sink skips it (its progress row has it) and the totals are exact."""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import App, make_text, truth, wait_for
from tests.integration.kafka_helpers import fresh_topic, send
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED
from tests.integration.test_structured_postgres import (
    SKIPPED,
    recorded_batch,
    structured_pg_args,
    wait_for_batch,
    wait_for_pg_totals,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def stdout_pipe(tmp_path: Path) -> Iterator[Path]:
    """A FIFO where the first app's stdout goes (the harness's run1.out), with a reader
    that never reads, so that the app's writes succeed until the pipe is full."""
    fifo = tmp_path / "run1.out"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        yield fifo
    finally:
        os.close(reader)


def fill(fifo: Path) -> int:
    """Write to the pipe until it holds no byte more; the bytes written."""
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    written = 0
    try:
        for size in (4096, 1):  # whole pages, then the last page's room
            while True:
                try:
                    written += os.write(writer, b"x" * size)
                except OSError as exc:
                    assert exc.errno == errno.EAGAIN
                    break
    finally:
        os.close(writer)
    return written


def blocked_on_stdout(app: App) -> bool:
    """Whether a thread of the driver's Python process sleeps writing to a full pipe."""
    waits = []
    for thread in Path(f"/proc/{app.proc.pid}/task").iterdir():
        try:
            waits.append((thread / "wchan").read_text())
        except OSError:  # the thread ended meanwhile
            continue
    # The kernel's function: pipe_write, anon_pipe_write in Linux 6.x.
    return any(wait.endswith("pipe_write") for wait in waits)


def test_a_kill_between_the_offsets_log_and_the_commit_is_exact(
    dirs: dict[str, Path],
    start_app: Any,
    pg_dsn: str,
    pg_schema: str,
    kafka_bootstrap: str,
    stdout_pipe: Path,
) -> None:
    table = f"{pg_schema}.word_totals"
    topic = fresh_topic("midcommit")
    kafka = ["--source", "kafka", "--bootstrap-servers", kafka_bootstrap, "--topics", topic]
    args = structured_pg_args(
        dirs, pg_dsn, table, *kafka, "--batch-interval", "2", "--sink", "console"
    )
    offsets, commits = dirs["checkpoint"] / "offsets", dirs["checkpoint"] / "commits"
    rng = random.Random(59)
    texts = [make_text(rng, 20).splitlines() for _ in range(3)]
    send(kafka_bootstrap, topic, texts[0], partitions=3)
    app = start_app(*args)  # its stdout: the pipe (run1.out)
    app.wait_for_log(QUERY_STARTED)
    before = wait_for_batch(pg_dsn, table, 0, app)
    wait_for(f"commits/{before}", lambda: (commits / str(before)).exists(), 90, app)

    assert fill(stdout_pipe) >= 4096
    send(kafka_bootstrap, topic, texts[1], partitions=3)
    batch = wait_for_batch(pg_dsn, table, before + 1, app)  # the postgres sink committed it
    wait_for("the driver blocked on its stdout", lambda: blocked_on_stdout(app), 90, app)
    assert (offsets / str(batch)).exists() and not (commits / str(batch)).exists()
    app.kill9()
    assert not (commits / str(batch)).exists()  # the kill landed between the two
    assert recorded_batch(pg_dsn, table) == batch

    send(kafka_bootstrap, topic, texts[2], partitions=3)  # while it is down
    again = start_app(*args)
    again.wait_for_log(QUERY_RECOVERED)
    wait_for_pg_totals(pg_dsn, table, truth([line for t in texts for line in t]), again)
    assert int(again.wait_for_log(SKIPPED).group(1)) == batch  # run again, skipped
    assert again.terminate() == 0
    assert "Traceback" not in again.log()
