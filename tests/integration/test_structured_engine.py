"""`run --engine structured` end to end: the files source and sink, exact totals over
several files, then kill -9 of the driver's whole process group mid-run and a restart on
the same checkpoint location; the keyed sum exact in decimals; the console line; the
socket source (demos)."""

from __future__ import annotations

import random
import re
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from bench.harness.processes import session_processes
from streaming_app.lifecycle.worker_daemon import PRELOADED
from tests.integration.batch_waits import batch_ids, kill_mid_batch, wait_planned
from tests.integration.conftest import common_args, files_args
from tests.integration.harness import (
    LineServer,
    cli_totals,
    drop_file,
    make_text,
    truth,
    wait_for_totals,
)
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED

pytestmark = pytest.mark.timeout(300)


def structured_args(dirs: dict[str, Path], *extra: str) -> list[str]:
    """A files-source run of the structured engine with the files sink.

    A base every 60 s: a micro-batch that crosses a multiple of it writes a base, and on a
    loaded machine (first micro-batches of 20-30 s) a shorter interval made every one a
    base, so the deltas the kill test asserts were never written."""
    config = dirs["checkpoint"].parent / "structured.ini"
    config.write_text("[output]\noutput_base_interval = 60\noutput_keep = 2\n")
    return ["--engine", "structured", "--config", str(config), *files_args(dirs), *extra]


@pytest.mark.timeout(480)  # up to six more micro-batches on a loaded machine
def test_files_exact_across_kill_9_and_restart(dirs: dict[str, Path], start_app: Any) -> None:
    rng = random.Random(19)
    texts = [make_text(rng, 30)]
    # Present before the first start: counted, unlike with the DStream engine (docs).
    drop_file(dirs["input"], "before-start.txt", texts[0].encode())
    first = start_app(*structured_args(dirs))
    first.wait_for_log(QUERY_STARTED)
    for i in range(3):  # spread over micro-batches (deltas and bases): each one planned
        known = batch_ids(dirs["checkpoint"], "offsets")
        texts.append(make_text(rng, 30))
        drop_file(dirs["input"], f"a{i}.txt", texts[-1].encode())
        wait_planned(dirs["checkpoint"], known, first)
    wait_for_totals(dirs["output"], truth(texts), first)
    # The Python workers fork from the app's preloaded daemon (a local master).
    commands = session_processes(first.proc.pid).values()
    assert any(f"-m {PRELOADED} " in command for command in commands), list(commands)

    # Kill -9 the driver and its JVM while a micro-batch is in flight: its offsets logged,
    # its commit not (checked; a micro-batch that committed first is tried again).
    def in_flight() -> None:
        texts.append(make_text(rng, 30))
        drop_file(dirs["input"], f"in-flight-{len(texts)}.txt", texts[-1].encode())

    kill_mid_batch(first, dirs["checkpoint"], in_flight)

    texts.append(make_text(rng, 30))
    drop_file(dirs["input"], "while-down.txt", texts[-1].encode())
    second = start_app(*structured_args(dirs))
    second.wait_for_log(QUERY_RECOVERED)
    assert "Started new query" not in second.log()
    texts.append(make_text(rng, 30))
    drop_file(dirs["input"], "after-restart.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), second)
    # On a loaded machine each micro-batch so far may have written a base: the first one, one
    # that crossed a multiple of the base interval, the one a restart left the due base to.
    # More input until one writes a delta; a base falls due at most once a minute.
    for i in range(6):
        if "files: delta" in first.log() + second.log():
            break
        texts.append(make_text(rng, 30))
        drop_file(dirs["input"], f"more-{i}.txt", texts[-1].encode())
        wait_for_totals(dirs["output"], truth(texts), second)
    assert second.terminate() == 0
    assert "Stopping gracefully (SIGTERM)" in second.log()
    assert "Traceback" not in second.log()

    assert cli_totals(dirs["output"].parent, dirs["output"], "totals") == truth(texts)
    # The DStream engine (the default) refuses this checkpoint and leaves it as it is.
    metadata = (dirs["checkpoint"] / "metadata").read_bytes()
    dstream = start_app(*files_args(dirs))
    assert dstream.wait(timeout=120) == 3
    assert "holds a Structured Streaming query's checkpoint" in dstream.log()
    assert (dirs["checkpoint"] / "metadata").read_bytes() == metadata
    # Both kinds were written (older ones are pruned: output_keep = 2).
    written = first.log() + second.log()
    assert "files: delta" in written and "files: totals" in written, written[-3000:]


DEFERRED = (
    r"batch_id=(\d+) batch_time_ms=\d+: the first micro-batch after the restart; "
    r"the base and snapshot due now follow with the next one"
)


def test_a_restart_leaves_the_base_and_snapshot_due_to_its_second_micro_batch(
    dirs: dict[str, Path], start_app: Any
) -> None:
    rng = random.Random(23)
    config = dirs["checkpoint"].parent / "every-2-s.ini"
    config.write_text("[output]\noutput_base_interval = 2\n")
    args = ["--engine", "structured", "--config", str(config), *files_args(dirs)]
    args += ["--snapshot-interval", "2"]
    texts = [make_text(rng, 20)]
    first = start_app(*args)
    first.wait_for_log(QUERY_STARTED)
    drop_file(dirs["input"], "first.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), first)
    assert first.terminate() == 0

    # Down for longer than both intervals: a base and a snapshot fall due.
    texts.append(make_text(rng, 20))
    drop_file(dirs["input"], "while-down.txt", texts[-1].encode())
    second = start_app(*args)
    batch_id = int(second.wait_for_log(DEFERRED).group(1))
    wait_for_totals(dirs["output"], truth(texts), second)
    written = rf"batch_id={batch_id} batch_time_ms=\d+: \d+ totals changed, files: delta"
    second.wait_for_log(written, timeout=30)  # logged once its outputs are written
    assert not re.search(rf"wrote state snapshot batch_id={batch_id} ", second.log())

    texts.append(make_text(rng, 20))
    drop_file(dirs["input"], "after.txt", texts[-1].encode())
    after = rf"batch_id={batch_id + 1} batch_time_ms=\d+: \d+ totals changed, files: totals"
    second.wait_for_log(after)
    assert re.search(rf"wrote state snapshot batch_id={batch_id + 1} ", second.log())
    wait_for_totals(dirs["output"], truth(texts), second)
    assert second.terminate() == 0
    assert cli_totals(dirs["output"].parent, dirs["output"], "totals") == truth(texts)


HEADER = "region,amount"


def test_keyed_sum_exact_and_console_line(dirs: dict[str, Path], start_app: Any) -> None:
    args = structured_args(
        dirs, "--sink", "console", "--job", "keyed-sum", "--csv-fields", HEADER,
        "--key-field", "region", "--value-field", "amount",
    )  # fmt: skip
    app = start_app(*args)
    app.wait_for_log(QUERY_STARTED)
    text = f"{HEADER}\neu,0.1\nus,10\neu,0.2\nbad row\nus,x\n,5\n"
    drop_file(dirs["input"], "s1.csv", text.encode())
    wait_for_totals(dirs["output"], {"eu": Decimal("0.3"), "us": Decimal(10)}, app)
    # The bad rows are skipped and warned of on the driver, as the DStream engine does.
    app.wait_for_log(
        r"batch_id=\d+ batch_time_ms=\d+: skipped 3 bad CSV rows \(wrong field count=1, "
        r"amount not a number=1, region empty=1; 3 since start\)"
    )
    drop_file(dirs["input"], "s2.csv", b"eu,123456789012345678.000000000001\nus,-0.5\n")
    expected = {"eu": Decimal("123456789012345678.300000000001"), "us": Decimal("9.5")}
    wait_for_totals(dirs["output"], expected, app)
    assert app.terminate() == 0
    out = app.out_path.read_text()
    assert "Counts at time " in out
    assert "('eu', 123456789012345678.300000000001), ('us', 9.5)" in out


def test_a_file_moved_in_with_a_month_old_time_is_counted(
    dirs: dict[str, Path], start_app: Any
) -> None:
    """A file moved in after the first micro-batch whose modification time is a month
    before the newest file's (`mv` keeps it): counted. Spark's file source alone skips it
    without a word (its maxFileAge, 7 days: the control)."""
    app = start_app(*structured_args(dirs))
    app.wait_for_log(QUERY_STARTED)
    drop_file(dirs["input"], "new.txt", b"one two two\n")
    wait_for_totals(dirs["output"], {"one": 1, "two": 2}, app)
    month_ago = int((time.time() - 30 * 86400) * 1000)
    drop_file(dirs["input"], "old-export.txt", b"two three\n", mtime_ms=month_ago)
    wait_for_totals(dirs["output"], {"one": 1, "two": 3, "three": 1}, app, timeout=60)
    assert app.terminate() == 0, app.log()[-3000:]


def test_socket_source_counts_what_it_is_sent(dirs: dict[str, Path], start_app: Any) -> None:
    lines = ["the quick brown fox", "jumps over the lazy dog", "the end"] * 20
    server = LineServer(lines)
    try:
        app = start_app(
            "--engine", "structured", "--source", "socket", "--host", "127.0.0.1",
            "--port", str(server.port), *common_args(dirs),
        )  # fmt: skip
        wait_for_totals(dirs["output"], truth(lines), app)
        assert app.terminate() == 0
    finally:
        server.close()
