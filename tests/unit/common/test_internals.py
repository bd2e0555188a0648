"""The start check of the private parts of PySpark and kafka-python the app uses."""

from __future__ import annotations

import logging

import pytest

from streaming_app.common import internals
from streaming_app.errors import ConfigError


def test_every_reach_is_found_in_the_installed_packages(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        internals.check_internals(kafka=True)
    assert caplog.records == []  # the installed versions are the checked ones


def test_a_missing_one_is_one_line_naming_the_module_that_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pyspark.daemon

    monkeypatch.delattr(pyspark.daemon, "manager")
    with pytest.raises(ConfigError) as caught:
        internals.check_internals(kafka=False)
    assert str(caught.value) == (
        f"pyspark {internals._version('pyspark')} has no pyspark.daemon.manager, which the "
        "app's lifecycle/worker_daemon.py uses (docs/internals.md); install pyspark 4.3.x"
    )


def test_kafka_pythons_patch_is_checked_for_kafka_runs_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka.consumer.fetcher import Fetcher

    monkeypatch.delattr(Fetcher, "PartitionRecords")
    internals.check_internals(kafka=False)
    with pytest.raises(ConfigError, match=r"has no kafka\.consumer\.fetcher\.Fetcher"):
        internals.check_internals(kafka=True)


def test_another_version_is_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(internals.CHECKED, "pyspark", "4.2")
    with caplog.at_level(logging.WARNING):
        internals.check_internals(kafka=False)
    [record] = caplog.records
    assert "were checked with 4.2.x (docs/internals.md)" in record.getMessage()


def test_every_reach_is_in_docs_internals() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "internals.md").read_text("utf-8")
    for _, where, _ in internals.SPARK_REACHES + internals.KAFKA_REACHES:
        assert f"`{where}`" in page, where
