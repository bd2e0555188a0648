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
