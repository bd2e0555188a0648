"""The user-facing commands: the demo, scripts/submit.sh, scripts/netcat-demo.sh, Java checks."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streaming_app.tools.processes import kill_group, signal_group
from tests.integration.harness import drop_file, free_port, truth, wait_for, wait_for_totals

ROOT = Path(__file__).resolve().parents[2]


def script_env() -> dict[str, str]:
    """Environment for the scripts: this virtualenv, loopback Spark, no stray settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMING_APP_")}
    env.update(STREAMING_APP_VENV=sys.prefix, SPARK_LOCAL_IP="127.0.0.1", PYTHONUNBUFFERED="1")
    return env


def wait_for_text(
    path: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float = 150
) -> None:
    """Wait until a script's log file contains `needle`; fail with the log if it dies first."""

    def in_log() -> bool:
        return needle in path.read_text(errors="replace")

    def tail() -> str:
        return path.read_text(errors="replace")[-3000:]

    wait_for(f"{needle!r} in {path.name}", in_log, timeout, pause=0.3, detail=tail, proc=proc)


@pytest.mark.timeout(240)
def test_demo_counts_the_sample_and_a_rerun_recovers(tmp_path: Path) -> None:
    checkpoint = tmp_path / "demo-ckpt"
    command = [
        sys.executable,
        "-m",
        "streaming_app",
        "demo",
        "--checkpoint-dir",
        str(checkpoint),
        "--duration",
        "8",
        "--output-dir",
        str(tmp_path / "out"),
    ]
    first = subprocess.run(command, capture_output=True, text=True, env=script_env(), timeout=200)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Creating new context" in first.stderr
    counts = re.findall(r"^Counts at time .* \[\('(\w+)', (\d+)\)", first.stdout, re.M)
    assert counts, first.stdout[-2000:]
    last_word, last_count = counts[-1][0], int(counts[-1][1])

    second = subprocess.run(command, capture_output=True, text=True, env=script_env(), timeout=200)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Creating new context" not in second.stderr
    assert re.search(
        r"Recovered streaming context from checkpoint .* at batch_time_ms=\d+", second.stderr
    )
    # The totals went on from the first run's, they did not restart from zero.
    again = re.findall(rf"^Counts at time .*\('{last_word}', (\d+)\)", second.stdout, re.M)
    assert again and int(again[0]) >= last_count


@pytest.mark.timeout(300)
def test_submit_script_runs_the_app_with_spark_submit(tmp_path: Path) -> None:
    dirs = {name: tmp_path / name for name in ("in", "ckpt", "out")}
    dirs["in"].mkdir()
    log_path = tmp_path / "submit.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(ROOT / "scripts" / "submit.sh"),
                "--master",
                "local[2]",
                "--conf",
                "spark.ui.enabled=false",
                "--",
                "--source",
                "files",
                "--input-dir",
                str(dirs["in"]),
                "--checkpoint-dir",
                str(dirs["ckpt"]),
                "--sink",
                "files",
                "--output-dir",
                str(dirs["out"]),
                "--duration",
                "35",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            # Without the tests' own JIT setting (tests/conftest.py): submit.sh gives the
            # driver JVM C1 only itself.
            env={k: v for k, v in script_env().items() if k != "JAVA_TOOL_OPTIONS"},
            start_new_session=True,
        )
    try:
        wait_for_text(log_path, "Started new streaming context", proc)
        assert "Picked up JAVA_TOOL_OPTIONS: -XX:TieredStopAtLevel=1" in log_path.read_text()
        text = "spark submit words\nsubmit words\n"
        drop_file(dirs["in"], "a.txt", text.encode())
        wait_for_totals(dirs["out"], truth([text]))
        assert proc.wait(timeout=120) == 0, log_path.read_text()[-3000:]
    finally:
        kill_group(proc)
    assert (ROOT / "dist" / "streaming_app-pyfiles.zip").is_file()


@pytest.mark.timeout(240)
def test_netcat_demo_counts_what_is_typed_into_nc(tmp_path: Path) -> None:
    if shutil.which("nc") is None:
        if os.environ.get("CI"):
            pytest.fail("nc is required in CI (apt-get install netcat-openbsd)")
        pytest.skip("nc (netcat-openbsd) is not installed")
    port = free_port()
    out_path, err_path = tmp_path / "nc.out", tmp_path / "nc.err"
    env = dict(script_env(), NETCAT_CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [
                str(ROOT / "scripts" / "netcat-demo.sh"),
                str(port),
                "--",
                "--spark-conf",
                "spark.ui.enabled=false",
            ],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,
            # As a terminal starts it: a runner started in the background (`cmd &`)
            # ignores SIGINT, the script would inherit that, and bash cannot trap it then.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    app_pid = None
    try:
        wait_for_text(err_path, "receiver SocketReceiver-0 started", proc)
        app_pid = int(re.search(r"running as pid (\d+)", err_path.read_text()).group(1))  # type: ignore[union-attr]
        assert proc.stdin is not None
        proc.stdin.write(b"hello netcat\nhello world\nhello\n")
        proc.stdin.flush()
        wait_for_text(out_path, "('hello', 3)", proc, 60)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
        assert proc.wait(timeout=90) is not None
        assert "Stopping gracefully (SIGTERM)" in err_path.read_text()
        with pytest.raises(ProcessLookupError):
            os.kill(app_pid, 0)
    finally:
        kill_group(proc)
        if app_pid is not None:
            signal_group(app_pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_scripts_say_clearly_that_java_is_missing(tmp_path: Path) -> None:
    # A PATH with the tools the scripts use, but no java.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("python3", "sed", "head", "dirname", "cat", "sha256sum", "cut", "grep"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "STREAMING_APP_VENV": sys.prefix}
    for script in ("demo.sh", "test.sh", "submit.sh"):
        result = subprocess.run(
            ["/bin/bash", str(ROOT / "scripts" / script)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, (script, result.stderr)
        assert "Java 17 or 21 is needed" in result.stderr, (script, result.stderr)
        assert "Traceback" not in result.stderr


def test_test_script_refuses_a_worker_count_that_is_not_a_number() -> None:
    env = {**script_env(), "STREAMING_APP_TEST_WORKERS": "two"}
    result = subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "test.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "error: STREAMING_APP_TEST_WORKERS must be a whole number (0: one process), not 'two'"
    )


def test_submit_refuses_an_unknown_way_to_ship_the_code(tmp_path: Path) -> None:
    env = {**script_env(), "STREAMING_APP_CODE": "egg", "SPARK_CONF_DIR": str(tmp_path)}
    done = subprocess.run(
        [str(ROOT / "scripts" / "submit.sh"), "--master", "local[1]"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "error: STREAMING_APP_CODE must be zip or installed, not 'egg'"
    )
