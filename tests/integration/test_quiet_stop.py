"""A graceful stop prints no Java ERROR line and no stack trace: demo, socket, files, Kafka."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streaming_app.tools.demo import LineServer as FeedingServer
from tests.integration.conftest import common_args, files_args, kafka_args
from tests.integration.harness import drop_file, make_text, truth, wait_for, wait_for_totals
from tests.integration.kafka_helpers import fresh_topic, send
from tests.integration.test_scripts import kill_group, script_env, wait_for_text

pytestmark = pytest.mark.timeout(300)


def noisy_lines(log: str) -> list[str]:
    """Lines of a log that a graceful stop must not print: errors and stack traces."""
    return [
        line
        for line in log.splitlines()
        if " ERROR " in line
        or line.startswith("\tat ")
        or "Traceback" in line
        or "Exception" in line
    ]


def assert_quiet(log: str) -> None:
    noisy = noisy_lines(log)
    assert not noisy, "\n".join(noisy[:20]) + "\n---\n" + log[-3000:]


def counted(log: Path, batches: int) -> bool:
    """Whether the demo's log has `batches` lines of counts."""
    return log.read_text(errors="replace").count("Counts at time") >= batches


def test_noisy_lines_finds_java_errors_and_traces() -> None:
    log = (
        "26/11/24 08:59:45 ERROR BlockGenerator: Error in block pushing thread\n"
        "Caused by: java.util.concurrent.RejectedExecutionException: Task rejected\n"
        "\tat java.base/java.util.concurrent.ThreadPoolExecutor.execute(X.java:1)\n"
        "Traceback (most recent call last):\n"
        "2026-11-24 09:03:10,151 INFO    streaming_app.dstream.run: Stopped\n"
    )
    assert len(noisy_lines(log)) == 4


def demo_command(checkpoint: Path, duration: str) -> list[str]:
    return [
        sys.executable, "-m", "streaming_app", "demo",
        "--checkpoint-dir", str(checkpoint), "--duration", duration,
    ]  # fmt: skip


def test_the_demo_run_twice_on_one_checkpoint_stops_quietly(tmp_path: Path) -> None:
    command = demo_command(tmp_path / "demo-ckpt", "12")
    for run in ("first", "second"):
        done = subprocess.run(
            command, capture_output=True, text=True, env=script_env(), timeout=240
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "streaming_app.dstream.run: Stopped" in done.stderr, done.stderr[-3000:]
        assert ("Recovered streaming context" in done.stderr) == (run == "second")
        assert_quiet(done.stderr)
        # An unchanged rerun: no setting said to differ, no Spark note on the context the
        # app made for the recovery.
        assert "differ from the checkpoint" not in done.stderr, done.stderr[-3000:]
        assert "Using an existing SparkContext" not in done.stderr, done.stderr[-3000:]


def test_ctrl_c_stops_the_demo_quietly(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            demo_command(tmp_path / "demo-ckpt", "0"),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=script_env(),
            start_new_session=True,
        )
    try:
        wait_for_text(log, "Counts at time", proc)
        # Lines keep arriving while it runs: a few more batches counted.
        wait_for("3 more batches counted", partial(counted, log, 4), 60, proc=proc)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        kill_group(proc)
    text = log.read_text()
    assert "Stopping gracefully (SIGINT)" in text
    assert "streaming_app.dstream.run: Stopped" in text
    assert_quiet(text)


def test_socket_source_stops_quietly_while_lines_keep_arriving(
    dirs: dict[str, Path], start_app: Any
) -> None:
    # An outside server the app cannot pause: lines arrive up to the stop itself.
    server = FeedingServer(["the quick brown fox jumps"], rate=50.0).start()
    try:
        app = start_app(
            "--source", "socket", "--host", "127.0.0.1", "--port", str(server.port),
            *common_args(dirs),
        )  # fmt: skip
        app.wait_for_log(r"batch \S+ UTC records=[1-9]")
        assert app.terminate() == 0
    finally:
        server.stop()
    assert "Stopping gracefully (SIGTERM)" in app.log()
    assert_quiet(app.log())


def test_files_source_counts_records_per_batch_and_stops_quietly(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path
) -> None:
    rng = random.Random(5)
    texts = [make_text(rng, lines) for lines in (30, 17)]
    metrics = tmp_path / "metrics.jsonl"
    app = start_app(*files_args(dirs, "--metrics-file", str(metrics)))
    app.wait_for_log(r"Started new streaming context")
    for i, text in enumerate(texts):
        drop_file(dirs["input"], f"{i}.txt", text.encode())
    wait_for_totals(dirs["output"], truth(texts), app)
    assert app.terminate() == 0
    log = app.log()
    assert "Stopping gracefully (SIGTERM)" in log
    assert_quiet(log)
    # Every batch says how many lines it read, in the progress line and the metrics.
    progress = [int(n) if n != "?" else None for n in re.findall(r" records=(\d+|\?) ", log)]
    assert progress and None not in progress and sum(progress) == 47, progress
    recorded = [json.loads(line)["records"] for line in metrics.read_text().splitlines()]
    assert None not in recorded and sum(recorded) == 47, recorded


def test_kafka_run_stops_quietly_on_sigterm_to_its_process_group(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    rng = random.Random(7)
    topic = fresh_topic()
    sent = [make_text(rng, 1).strip() for _ in range(600)]
    send(kafka_bootstrap, topic, sent, partitions=2)
    # A cap spreads the backlog over several batches: the stop lands mid-stream.
    app = start_app(*kafka_args(dirs, kafka_bootstrap, topic, "--max-rate-per-partition", "40"))
    app.wait_for_log(r"batch \S+ UTC records=[1-9]")
    # To the whole process group, as a service manager sends it: the JVM must leave the
    # stop to the driver.
    os.killpg(app.proc.pid, signal.SIGTERM)
    assert app.wait() == 0
    assert "taking no new Kafka records" in app.log()
    assert_quiet(app.log())
