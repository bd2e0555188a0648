"""The demo's `nc -lk` stand-in and the port it remembers per checkpoint directory."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streaming_app.tools.demo import (
    DEMO_STATE,
    LineServer,
    _demo_port,
    _remember_port,
    sample_lines,
)

LINES = ["one", "two", "three"]


@pytest.fixture
def serve() -> Iterator[Callable[[list[str], float], LineServer]]:
    """Start LineServers on free loopback ports; all are stopped at the end of the test."""
    servers: list[LineServer] = []

    def start(lines: list[str], rate: float) -> LineServer:
        server = LineServer(lines, rate, port=0).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def connect(server: LineServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def read_lines(sock: socket.socket, count: int) -> list[str]:
    with sock.makefile("r", encoding="utf-8", newline="\n") as stream:
        lines = [stream.readline() for _ in range(count)]
    assert all(line.endswith("\n") for line in lines), lines  # no EOF before `count` lines
    return [line[:-1] for line in lines]


def test_sample_lines_are_the_bundled_text() -> None:
    lines = sample_lines()
    assert len(lines) > 5
    assert lines[0].startswith("Alice was beginning")
    assert all(line.strip() for line in lines)


@pytest.mark.timeout(30)
def test_serves_the_lines_in_order_and_cycles(serve: Callable[..., LineServer]) -> None:
    server = serve(LINES, 200.0)
    assert server.port > 0
    with connect(server) as client:
        assert read_lines(client, 7) == [*LINES, *LINES, "one"]


@pytest.mark.timeout(30)
def test_serves_the_sample_text(serve: Callable[..., LineServer]) -> None:
    server = serve(sample_lines(), 200.0)
    with connect(server) as client:
        assert read_lines(client, 3) == sample_lines()[:3]


@pytest.mark.timeout(30)
def test_sends_at_the_given_rate(serve: Callable[..., LineServer]) -> None:
    server = serve(LINES, 20.0)
    with connect(server) as client:
        started = time.monotonic()
        read_lines(client, 11)
        elapsed = time.monotonic() - started
    # The first line goes out at once, then one every 1/20 s: 10 intervals = 0.5 s.
    assert 0.45 <= elapsed < 5.0


@pytest.mark.timeout(30)
def test_keeps_serving_a_second_client_after_the_first_leaves(
    serve: Callable[..., LineServer],
) -> None:
    server = serve(LINES, 100.0)
    with connect(server) as first:
        assert read_lines(first, 2) == ["one", "two"]
    with connect(server) as second:
        assert read_lines(second, 4) == [*LINES, "one"]
    assert server.sent >= 6


@pytest.mark.timeout(30)
def test_stop_closes_the_listening_socket(serve: Callable[..., LineServer]) -> None:
    server = serve(LINES, 100.0)
    with connect(server) as client:
        read_lines(client, 1)
    server.stop()
    with pytest.raises(OSError):
        connect(server).close()


def test_demo_port_without_state_is_the_requested_port(tmp_path: Path) -> None:
    assert _demo_port(str(tmp_path), 5555) == 5555
    assert _demo_port(str(tmp_path), None) == 0
    assert _demo_port(str(tmp_path / "absent"), 5555) == 5555


def test_remembered_port_is_used(tmp_path: Path) -> None:
    _remember_port(str(tmp_path), 41234)
    assert _demo_port(str(tmp_path), None) == 41234
    assert _demo_port(str(tmp_path), 41234) == 41234


def test_remembered_port_beats_a_different_requested_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _remember_port(str(tmp_path), 41234)
    with caplog.at_level(logging.WARNING, logger="streaming_app.tools.demo"):
        assert _demo_port(str(tmp_path), 5555) == 41234
    assert "41234" in caplog.text and "5555" in caplog.text


def test_remember_port_creates_the_dir_and_overwrites(tmp_path: Path) -> None:
    checkpoint = tmp_path / "new" / "ck"
    _remember_port(str(checkpoint), 1111)
    _remember_port(str(checkpoint), 2222)
    assert _demo_port(str(checkpoint), None) == 2222
    assert sorted(p.name for p in checkpoint.iterdir()) == [DEMO_STATE]


@pytest.mark.parametrize("content", ["not json", "{}", '{"port": null}', '{"port": "x"}', "[]"])
def test_unreadable_state_falls_back_to_the_requested_port(tmp_path: Path, content: str) -> None:
    (tmp_path / DEMO_STATE).write_text(content)
    assert _demo_port(str(tmp_path), 5555) == 5555
