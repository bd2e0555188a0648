"""The socket source: exact counts from a test server; an unreachable server is retried."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import common_args
from tests.integration.harness import LineServer, free_port, truth, wait_for_totals

pytestmark = pytest.mark.timeout(300)


def socket_args(dirs: dict[str, Path], port: int) -> list[str]:
    return ["--source", "socket", "--host", "127.0.0.1", "--port", str(port), *common_args(dirs)]


LINES = ["the quick brown fox", "jumps over the lazy dog", "the end"] * 20


def test_socket_source_counts_exactly(dirs: dict[str, Path], start_app: Any) -> None:
    server = LineServer(LINES)
    try:
        app = start_app(*socket_args(dirs, server.port))
        wait_for_totals(dirs["output"], truth(LINES), app)
        assert app.terminate() == 0
    finally:
        server.close()


def test_unreachable_socket_is_retried_with_a_warning(
    dirs: dict[str, Path], start_app: Any
) -> None:
    port = free_port()
    app = start_app(*socket_args(dirs, port))
    app.wait_for_log(r"WARNING .*receiver SocketReceiver-0: .*Spark keeps retrying")
    assert app.proc.poll() is None, "the app died instead of retrying"
    server = LineServer(LINES, port)
    try:
        wait_for_totals(dirs["output"], truth(LINES), app)
        assert app.terminate() == 0
    finally:
        server.close()


def test_socket_totals_survive_a_graceful_restart(dirs: dict[str, Path], start_app: Any) -> None:
    # A graceful stop finishes its batches: this restart needs nothing from the receiver's
    # write-ahead log (it passes without it); the kill -9 test below needs it.
    more = ["a second run", "of the socket source"] * 7
    server = LineServer(LINES)
    try:
        app = start_app(*socket_args(dirs, server.port))
        wait_for_totals(dirs["output"], truth(LINES), app)
        assert app.terminate() == 0
        server.lines = more  # what the next connection gets
        again = start_app(*socket_args(dirs, server.port))
        again.wait_for_log(r"Recovered streaming context")
        wait_for_totals(dirs["output"], truth(LINES + more), again)
        assert again.terminate() == 0
    finally:
        server.close()


def test_socket_lines_stored_before_a_kill_9_survive_the_restart(
    dirs: dict[str, Path], start_app: Any
) -> None:
    # Killed before its first state checkpoint (one a minute), the restarted job recomputes
    # the state from the batches' input: the receiver write-ahead log keeps the lines that
    # were stored. Without it their blocks died with the driver and the totals go back.
    args = ["--checkpoint-interval", "60"]
    more = ["lines after", "the kill"] * 5
    server = LineServer(LINES)
    try:
        app = start_app(*socket_args(dirs, server.port), *args)
        wait_for_totals(dirs["output"], truth(LINES), app)
        app.kill9()
        server.lines = more  # what the restarted receiver's connection gets
        again = start_app(*socket_args(dirs, server.port), *args)
        again.wait_for_log(r"Recovered streaming context")
        wait_for_totals(dirs["output"], truth(LINES + more), again)
        assert again.terminate() == 0
    finally:
        server.close()
