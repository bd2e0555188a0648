"""The offline tools (totals, report, checkpoint inspect/clean without verification) start no JVM.

Each command runs in a fresh interpreter; afterwards it reports which modules were loaded:
no pyspark (hence no JVM) and no driver code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming_app.sinks.files_layout import SUCCESS_MARKER, totals_name

PROBE = """
import json, sys
from click.testing import CliRunner
from streaming_app.cli.main import cli
result = CliRunner().invoke(cli, sys.argv[1:])
print(json.dumps({
    "exit_code": result.exit_code,
    "output": result.output,
    "pyspark": sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")),
    "driver": sorted(
        m for m in sys.modules
        if m.startswith(("streaming_app.dstream", "streaming_app.structured.run"))
    ),
}))
"""


def run_offline(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
def output_dir(tmp_path: Path) -> Path:
    batch = tmp_path / "out" / totals_name(1_700_000_000_000)
    batch.mkdir(parents=True)
    (batch / "part-00000").write_text("apple\t3\nbanana\t1\n")
    (batch / SUCCESS_MARKER).write_text("")
    return tmp_path / "out"


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> Path:
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    record = {"version": 1, "batch_time_ms": 1000, "ranges": [["words", 0, 0, 5]]}
    (ckpt / "offsets" / "1000").write_text(json.dumps(record))
    return ckpt


def test_totals_imports_no_spark_and_no_driver(output_dir: Path) -> None:
    result = run_offline("totals", "--output-dir", str(output_dir))
    assert result["exit_code"] == 0, result["output"]
    assert result["output"] == "apple\t3\nbanana\t1\n"
    assert result["pyspark"] == [] and result["driver"] == []


def test_report_imports_no_spark_and_no_driver(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    record = {"batch_time_ms": 2000, "batch_interval_ms": 2000, "completed_ms": 2500}
    metrics.write_text(json.dumps({**record, "records": 10, "processing_ms": 300}) + "\n")
    result = run_offline("report", str(metrics))
    assert result["exit_code"] == 0, result["output"]
    assert "1 batch" in str(result["output"])
    assert result["pyspark"] == [] and result["driver"] == []


@pytest.mark.parametrize("command", [["inspect"], ["clean"]])
def test_checkpoint_tools_without_verification_import_no_spark_and_no_driver(
    checkpoint_dir: Path, command: list[str]
) -> None:
    result = run_offline("checkpoint", *command, "--no-verify", str(checkpoint_dir))
    assert result["exit_code"] == 0, result["output"]
    assert result["pyspark"] == [] and result["driver"] == []


def test_inspecting_a_structured_checkpoint_imports_no_spark_even_verified(tmp_path: Path) -> None:
    from tests.unit.tools.test_structured_inspect import build_structured

    ckpt = build_structured(tmp_path / "sckpt")
    result = run_offline("checkpoint", "inspect", str(ckpt))  # no --no-verify: no JVM anyway
    assert result["exit_code"] == 0, result["output"]
    assert "Engine: structured" in str(result["output"])
    assert result["pyspark"] == [] and result["driver"] == []
