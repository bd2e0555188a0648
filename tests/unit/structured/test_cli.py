"""`run --engine structured` through click's CliRunner: what stops it before Spark; no JVM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import streaming_app.structured.requirements as requirements
import streaming_app.structured.run as run_module
from streaming_app.cli.main import cli
from streaming_app.common.fs import LocalFs
from streaming_app.recovery.metadata import METADATA_FORMAT
from streaming_app.structured.query import written_by_dstreams

# test_run's autouse fixture: no STREAMING_APP_* variables, no DStream JVM, logging restored.
from tests.unit.cli.test_run import _isolated, assert_usage_error  # noqa: F401


@pytest.fixture(autouse=True)
def _no_structured_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor does the structured engine get as far as Spark."""

    def no_jvm(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a unit test got as far as starting Spark")

    monkeypatch.setattr(run_module, "prepare_spark_env", no_jvm)


def test_a_missing_extra_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requirements, "_installed", lambda name: None)
    result = CliRunner().invoke(cli, ["run", "--engine", "structured"])
    line = assert_usage_error(result, "pip install 'streaming-app[structured]'")
    assert "pandas, pyarrow" in line


def test_the_engine_comes_from_the_environment_too() -> None:
    env = {"STREAMING_APP_ENGINE": "structured", "STREAMING_APP_WINDOW": "4"}
    result = CliRunner().invoke(cli, ["run"], env=env)
    assert_usage_error(result, "--engine structured does not support window")


def test_a_dstream_checkpoint_is_recognized(tmp_path: Path) -> None:
    assert not written_by_dstreams(LocalFs(), str(tmp_path))
    (tmp_path / "metadata").write_text('{"id":"a-query-id"}')
    assert not written_by_dstreams(LocalFs(), str(tmp_path))
    (tmp_path / "metadata").write_text(json.dumps({"format": METADATA_FORMAT}))
    assert written_by_dstreams(LocalFs(), str(tmp_path))
    (tmp_path / "metadata").unlink()
    (tmp_path / "checkpoint-1764000000000").write_bytes(b"")
    assert written_by_dstreams(LocalFs(), str(tmp_path))
