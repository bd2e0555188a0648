"""The warning about a standalone master's REST submission server left on."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import pytest

from streaming_app.lifecycle.rest_server import master_hosts, warn_open_rest_server


@pytest.fixture
def http_port() -> Iterator[int]:
    """A loopback server that answers any request as Spark's REST server does (HTTP)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()


def test_master_hosts() -> None:
    assert master_hosts("spark://m1:7077,m2:7078") == ["m1", "m2"]
    assert master_hosts("spark://m:7077") == ["m"]
    assert master_hosts("local[2]") == master_hosts("yarn") == []


def test_an_answering_rest_server_is_one_warning_naming_the_setting(
    http_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {"spark.authenticate": "true", "spark.master.rest.port": str(http_port)}
    with caplog.at_level(logging.WARNING):
        answered = warn_open_rest_server("spark://127.0.0.1:7077", settings)
    assert answered == [f"127.0.0.1:{http_port}"]
    [record] = caplog.records
    assert "spark.master.rest.enabled false" in record.getMessage()
    assert f"127.0.0.1:{http_port}" in record.getMessage()


def test_no_warning_without_authentication_or_without_a_server(
    http_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    open_port = {"spark.master.rest.port": str(http_port)}
    assert warn_open_rest_server("spark://127.0.0.1:7077", open_port) == []  # auth off
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    settings = {"spark.authenticate": "true", "spark.master.rest.port": str(port)}
    assert warn_open_rest_server("spark://127.0.0.1:7077", settings) == []
    assert warn_open_rest_server("local[2]", {"spark.authenticate": "true"}) == []
    assert caplog.records == []


def test_a_port_that_answers_but_not_http_is_not_a_rest_server() -> None:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"\x00\x00\x00\x05hello")  # Spark's RPC, say

    threading.Thread(target=serve, daemon=True).start()
    try:
        settings = {
            "spark.authenticate": "true",
            "spark.master.rest.port": str(server.getsockname()[1]),
        }
        assert warn_open_rest_server("spark://127.0.0.1:7077", settings) == []
    finally:
        server.close()
