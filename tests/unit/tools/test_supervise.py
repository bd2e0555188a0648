"""The supervisor's restart rules, with small Python scripts standing in for the driver."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from streaming_app.cli.main import cli
from streaming_app.errors import EXIT_CHECKPOINT, EXIT_CRASH, EXIT_OK, EXIT_USAGE
from streaming_app.tools.supervise import Policy, Supervisor, describe, is_crash, run_command
from tests.integration.harness import wait_for

FAST = Policy(max_failures=5, failure_window=60, backoff=0.01, max_backoff=0.05)


def script(tmp_path: Path, body: str) -> list[str]:
    """A driver stand-in; `starts` counts its runs in a file."""
    path = tmp_path / "driver.py"
    path.write_text(
        "import os, signal, sys, time\n"
        f"counter = {str(tmp_path / 'starts')!r}\n"
        "n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1\n"
        "open(counter, 'w').write(str(n))\n" + body
    )
    return [sys.executable, str(path)]


def test_crashes_are_restarted_until_the_driver_ends_cleanly(tmp_path: Path) -> None:
    command = script(tmp_path, "sys.exit(1 if n < 3 else 0)\n")
    supervisor = Supervisor(command, FAST)
    assert supervisor.run() == EXIT_OK
    assert supervisor.starts == 3
    assert (tmp_path / "starts").read_text() == "3"


def test_death_by_a_signal_is_a_crash(tmp_path: Path) -> None:
    command = script(tmp_path, "os.kill(os.getpid(), signal.SIGKILL) if n == 1 else None\n")
    supervisor = Supervisor(command, FAST)
    assert supervisor.run() == EXIT_OK
    assert supervisor.starts == 2


@pytest.mark.parametrize("code", [EXIT_USAGE, EXIT_CHECKPOINT, 4, 130])
def test_exits_that_a_restart_cannot_fix_end_the_supervisor_with_their_code(
    tmp_path: Path, code: int
) -> None:
    supervisor = Supervisor(script(tmp_path, f"sys.exit({code})\n"), FAST)
    assert supervisor.run() == code
    assert supervisor.starts == 1


def test_a_crash_loop_stops_with_a_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = Policy(max_failures=3, failure_window=60, backoff=0.01, max_backoff=0.01)
    supervisor = Supervisor(script(tmp_path, "sys.exit(1)\n"), policy)
    with caplog.at_level(logging.INFO, logger="streaming_app.tools.supervise"):
        assert supervisor.run() == EXIT_CRASH
    assert supervisor.starts == 3
    assert "crash loop: the driver crashed 3 times within 60 s" in caplog.text
    assert caplog.text.count("restarting in") == 2


def test_backoff_doubles_per_crash_in_the_window_and_is_capped() -> None:
    now = [0.0]
    supervisor = Supervisor(["unused"], Policy(10, 100, 1, 5), clock=lambda: now[0])
    assert supervisor.next_delay() == 0
    delays = []
    for _ in range(5):
        assert not supervisor.record_crash()
        delays.append(supervisor.next_delay())
    assert delays == [1, 2, 4, 5, 5]


def test_crashes_older_than_the_window_are_forgotten() -> None:
    now = [0.0]
    supervisor = Supervisor(["unused"], Policy(3, 10, 1, 60), clock=lambda: now[0])
    assert not supervisor.record_crash()
    now[0] = 5
    assert not supervisor.record_crash()
    now[0] = 16  # the first two are more than 10 s old
    assert not supervisor.record_crash()
    assert supervisor.next_delay() == 1
    now[0] = 17
    assert not supervisor.record_crash()
    now[0] = 18
    assert supervisor.record_crash()  # three within 10 s


def test_a_forwarded_sigterm_stops_the_driver_which_is_not_restarted(tmp_path: Path) -> None:
    marker = tmp_path / "stopped"
    body = (
        "def stop(signum, frame):\n"
        f"    open({str(marker)!r}, 'w').write(signal.Signals(signum).name)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"open({str(tmp_path / 'ready')!r}, 'w').close()\n"
        "time.sleep(60)\n"
        "sys.exit(1)\n"
    )
    supervisor = Supervisor(script(tmp_path, body), FAST)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(supervisor.run()))
    runner.start()
    wait_for("the child ready", (tmp_path / "ready").exists, 20, pause=0.05)
    supervisor._forward(signal.SIGTERM, None)
    runner.join(20)
    assert result == [EXIT_OK]
    assert marker.read_text() == "SIGTERM"
    assert supervisor.starts == 1


def test_a_stop_during_the_backoff_wait_ends_at_once(tmp_path: Path) -> None:
    policy = Policy(max_failures=5, failure_window=60, backoff=30, max_backoff=30)
    supervisor = Supervisor(script(tmp_path, "sys.exit(1)\n"), policy)
    timer = threading.Timer(1.0, supervisor._forward, (signal.SIGTERM, None))
    timer.start()
    started = time.monotonic()
    assert supervisor.run() == EXIT_OK
    assert time.monotonic() - started < 20  # not the 30 s backoff
    assert supervisor.starts == 1


def test_exit_codes_are_described() -> None:
    assert is_crash(1) and is_crash(-9)
    assert not any(is_crash(code) for code in (0, 2, 3, 4, 130))
    assert describe(-9) == "killed by SIGKILL"
    assert describe(3) == "exit code 3"


def test_the_driver_command_is_streaming_app_run() -> None:
    assert run_command(["--source", "files"]) == [
        sys.executable,
        "-m",
        "streaming_app",
        "run",
        "--source",
        "files",
    ]


def test_cli_rejects_bad_policy_values() -> None:
    result = CliRunner().invoke(cli, ["supervise", "--max-failures", "0", "--", "--source", "x"])
    assert result.exit_code == 2
    assert "--max-failures" in result.output


def test_a_usage_error_of_the_driver_ends_supervise_with_exit_2() -> None:
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "streaming_app", "supervise", "--", "--batch-interval", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "batch_interval" in result.stderr or "--batch-interval" in result.stderr
    assert result.stderr.count("started driver pid") == 1
    assert "not restarting" in result.stderr
