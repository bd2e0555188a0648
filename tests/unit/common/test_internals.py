"""The start check of the private parts of PySpark and kafka-python the app uses."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

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


def test_the_methods_and_fields_the_lean_decoding_uses_are_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka.consumer.fetcher import Fetcher
    from kafka.record import default_records

    with monkeypatch.context() as patched:
        patched.delattr(Fetcher.PartitionRecords, "_unpack_records")
        with pytest.raises(ConfigError, match=r"PartitionRecords\._unpack_records, which"):
            internals.check_internals(kafka=True)
    original = default_records.DefaultRecordBatch.__init__

    def without_pos(self: Any, buffer: Any) -> None:
        original(self, buffer)
        del self._pos

    monkeypatch.setattr(default_records.DefaultRecordBatch, "__init__", without_pos)
    with pytest.raises(ConfigError, match=r"DefaultRecordBatch\._buffer, _pos, which the app's "):
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
    page = (Path(__file__).resolve().parents[3] / "docs" / "internals.md").read_text("utf-8")
    for _, where, _ in internals.SPARK_REACHES + internals.KAFKA_REACHES:
        assert f"`{where}`" in page, where


# PySpark's and kafka-python's private names the app reaches for (an attribute of theirs:
# `self.<name>` is the app's own).
PRIVATE = re.compile(
    r"(?<!self)\.(_jvm|_jsc|_jrdd|_jrdd_deserializer|_gateway|_jssc|_jdstream|_sc|_ssc"
    r"|_conf|_reserialize|_fetcher|_active_spark_context|_ensure_initialized|_buffer|_pos"
    r"|_unpack_records|_maybe_skip_record)\b"
    r"|\"_accumulatorServer\"|\._accumulatorServer\b"
    r"|\"(_client|_gateway)\"|def (_unpack_records|_maybe_skip_record)"
)


def test_every_module_that_reaches_in_is_on_the_page() -> None:
    package = Path(internals.__file__).resolve().parents[1]
    page = (package.parent / "docs" / "internals.md").read_text("utf-8")
    reaching = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if PRIVATE.search(path.read_text("utf-8")) and path.name != "internals.py"
    }
    assert {
        "state/buckets.py", "sources/kafka/client.py", "lifecycle/stopping.py",
        "common/output_errors.py",
    } <= reaching  # fmt: skip
    assert sorted(where for where in reaching if f"`{where}`" not in page) == []
