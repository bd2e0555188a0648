"""Bad input about the cluster's secret: one line, exit 2, nothing written, either engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import free_port

pytestmark = pytest.mark.timeout(180)


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`streaming-app run` on an empty files source, with a checkpoint under tmp_path."""
    (tmp_path / "in").mkdir(exist_ok=True)
    command = [
        sys.executable, "-m", "streaming_app", "run", "--source", "files",
        "--input-dir", str(tmp_path / "in"), "--checkpoint-dir", str(tmp_path / "ckpt"),
        "--sink", "console", "--duration", "5", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=150, check=False)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The run's one `Error:` line; no traceback, no Java stack trace."""
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr, result.stderr
    return errors[0]


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_a_secret_file_others_can_read_is_refused_before_anything_is_written(
    tmp_path: Path, mode: int
) -> None:
    secret = tmp_path / "spark-secret"
    secret.write_text("s3cr3t-not-shown\n")
    secret.chmod(mode)
    result = run(tmp_path, "--spark-secret-file", str(secret))
    line = one_error_line(result)
    assert f"spark_secret_file {secret}: readable or writable by others" in line
    assert "s3cr3t-not-shown" not in result.stderr + result.stdout
    assert not (tmp_path / "ckpt").exists()


def test_a_missing_secret_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "--spark-secret-file", str(tmp_path / "nope")))
    assert f"spark_secret_file {tmp_path / 'nope'}: cannot read it" in line
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_authentication_on_a_cluster_master_without_a_secret_is_one_line(
    tmp_path: Path, engine: str
) -> None:
    # No master listens there: the check comes before Spark would connect.
    master = f"spark://127.0.0.1:{free_port()}"
    result = run(
        tmp_path, "--engine", engine, "--master", master, "--allow-local-checkpoint",
        "--spark-conf", "spark.authenticate=true",
    )  # fmt: skip
    line = one_error_line(result)
    assert line.startswith(
        f"Error: spark.authenticate is on but no secret was given for master {master}"
    )
    assert "spark_secret_file" in line
    assert not [p for p in (tmp_path / "ckpt").rglob("*") if p.is_file()], "something was written"
