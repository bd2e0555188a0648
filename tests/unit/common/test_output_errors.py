"""App errors in a batch's output: re-raised for Spark, with Spark's log of them turned off."""

from __future__ import annotations

from unittest import mock

import pytest

from streaming_app.common.output_errors import app_errors_in_one_line, silence_spark_log
from streaming_app.errors import SinkSetupError


def test_an_app_error_turns_sparks_log_off_and_still_fails_the_batch() -> None:
    sc = mock.MagicMock(name="SparkContext")
    with pytest.raises(SinkSetupError), app_errors_in_one_line(sc):
        raise SinkSetupError("PostgreSQL table wc has a text count column")
    sc.setLogLevel.assert_called_once_with("OFF")


def test_other_failures_keep_sparks_log() -> None:
    sc = mock.MagicMock(name="SparkContext")
    with pytest.raises(ZeroDivisionError), app_errors_in_one_line(sc):
        raise ZeroDivisionError
    with app_errors_in_one_line(sc):
        pass
    sc.setLogLevel.assert_not_called()


def test_a_stopped_context_is_no_error() -> None:
    sc = mock.MagicMock(name="SparkContext")
    sc.setLogLevel.side_effect = AttributeError("'NoneType' object has no attribute 'sc'")
    silence_spark_log(sc)


def _reset_after_auth(server: object, token: str) -> None:
    """Connect to an accumulator server as the JVM does, then reset the connection."""
    import socket
    import struct

    host, port = server.server_address  # type: ignore[attr-defined]
    with socket.create_connection((host, port)) as conn:
        conn.sendall(token.encode())
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_a_reset_accumulator_connection_prints_no_traceback_once_the_run_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import time

    from pyspark.accumulators import _start_update_server

    token = "t" * 16
    server = _start_update_server(token, False)
    sc = mock.MagicMock(name="SparkContext")
    sc._accumulatorServer = server
    try:
        _reset_after_auth(server, token)  # the control: PySpark's own handling prints it
        deadline = time.monotonic() + 10
        while "Traceback" not in capsys.readouterr().err:
            assert time.monotonic() < deadline, "the reset printed no traceback"
            time.sleep(0.05)
        silence_spark_log(sc)
        _reset_after_auth(server, token)
        time.sleep(1.5)  # the handler's poll wakes every second
        assert "Traceback" not in capsys.readouterr().err
    finally:
        server.shutdown()
