"""The JVM-free parts of run.py: the writable-directory check and the stop request."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streaming_app.common.failure_text import failure_summary
from streaming_app.common.spark_env import launching_jvm
from streaming_app.errors import EXIT_INTERRUPTED, EXIT_USAGE, ConfigError
from streaming_app.lifecycle.checks import check_checkpoint_location, ensure_writable_dir
from streaming_app.lifecycle.stopping import StartInterruptedError, StopRequest
from streaming_app.settings.loading import load_config
from streaming_app.settings.schema import AppConfig


def test_ensure_writable_dir_creates_missing_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "checkpoint"
    ensure_writable_dir("checkpoint_dir", str(target))
    assert target.is_dir()
    assert list(target.iterdir()) == []  # the write probe is cleaned up


def test_ensure_writable_dir_leaves_existing_content(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    ensure_writable_dir("output_dir", str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_ensure_writable_dir_under_a_file_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "checkpoint"
    with pytest.raises(ConfigError) as info:
        ensure_writable_dir("checkpoint_dir", str(target))
    assert str(info.value).startswith(f"checkpoint_dir {target}: not writable")
    assert info.value.exit_code == EXIT_USAGE


def test_ensure_writable_dir_on_a_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ConfigError, match="output_dir"):
        ensure_writable_dir("output_dir", str(path))


@pytest.mark.parametrize("uri", ["hdfs://namenode:8020/ck", "s3a://bucket/ck"])
def test_ensure_writable_dir_skips_uris(
    uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ensure_writable_dir("checkpoint_dir", uri)
    assert list(tmp_path.iterdir()) == []


def test_first_signal_requests_a_stop() -> None:
    stop = StopRequest()
    assert not stop.event.is_set()
    stop._handle(signal.SIGTERM, None)
    assert stop.event.is_set()
    assert stop.reason == "SIGTERM"


def test_second_signal_exits_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    class ExitCalledError(Exception):
        pass

    def fake_exit(code: int) -> None:
        raise ExitCalledError(code)

    monkeypatch.setattr(os, "_exit", fake_exit)  # run.py calls os._exit
    stop = StopRequest()
    stop._handle(signal.SIGINT, None)
    with pytest.raises(ExitCalledError) as info:
        stop._handle(signal.SIGTERM, None)
    assert info.value.args == (EXIT_INTERRUPTED,)
    assert stop.reason == "SIGINT"


def test_install_routes_sigterm_and_sigint() -> None:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    stop = StopRequest()
    try:
        stop.install()
        assert signal.getsignal(signal.SIGTERM) == stop._handle
        assert signal.getsignal(signal.SIGINT) == stop._handle
        os.kill(os.getpid(), signal.SIGTERM)  # safe: our handler is in place
        assert stop.event.wait(5)
        assert stop.reason == "SIGTERM"
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_ctrl_c_while_starting_is_a_stop_request_and_sigint_is_ours_again() -> None:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    stop = StopRequest()
    try:
        with pytest.raises(StartInterruptedError), stop.through_start():
            # What creating a SparkContext does: PySpark's own SIGINT handler.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # interrupted
        assert stop.event.is_set() and stop.reason == "SIGINT"
        assert signal.getsignal(signal.SIGINT) == stop._handle
        assert signal.getsignal(signal.SIGTERM) == stop._handle
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_start_takes_sigint_back_from_pyspark() -> None:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    stop = StopRequest()
    try:
        with stop.through_start():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        assert signal.getsignal(signal.SIGINT) == stop._handle
        assert not stop.event.is_set()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _ignored_signals(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^SigIgn:\s*([0-9a-f]+)", status, re.M).group(1), 16)  # type: ignore[union-attr]


def test_the_jvm_pyspark_launches_meanwhile_ignores_sigterm() -> None:
    from pyspark import java_gateway

    launch = java_gateway.Popen
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    with launching_jvm():
        child = java_gateway.Popen(sleep, preexec_fn=lambda: None)
    other = subprocess.Popen(sleep)
    try:
        assert _ignored_signals(child.pid) & (1 << (signal.SIGTERM - 1))
        assert not _ignored_signals(other.pid) & (1 << (signal.SIGTERM - 1))
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN  # the driver still hears it
    finally:
        for proc in (child, other):
            proc.kill()
            proc.wait()
    assert java_gateway.Popen is launch


PYTHON_FAILURE = """org.apache.spark.SparkException: An exception was raised by Python:
Traceback (most recent call last):
  File "/app/streaming_app/sinks.py", line 59, in write_totals
py4j.protocol.Py4JJavaError: An error occurred while calling o539.saveAsTextFile.
: org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: file:/out
\tat org.apache.hadoop.fs.RawLocalFileSystem.mkdirs(RawLocalFileSystem.java:1)
"""


def test_failure_summary_names_the_innermost_informative_exception() -> None:
    assert failure_summary(PYTHON_FAILURE) == (
        "ParentNotDirectoryException: Parent path is not a directory: file:/out"
    )


def test_failure_summary_keeps_a_lone_wrapper_message() -> None:
    text = "org.apache.spark.SparkException: Failed to read checkpoint from directory /c\n\tat x"
    assert failure_summary(text) == text.splitlines()[0]


def test_failure_summary_of_nothing() -> None:
    assert failure_summary("  \n") == "unknown error"


def _located(checkpoint_dir: str, allow: bool = False) -> AppConfig:
    return load_config(
        cli={"checkpoint_dir": checkpoint_dir, "allow_local_checkpoint": str(allow).lower()}
    )


def test_a_local_checkpoint_is_refused_for_a_cluster_master(tmp_path: Path) -> None:
    config = _located(str(tmp_path / "ckpt"))
    with pytest.raises(ConfigError) as caught:
        check_checkpoint_location(config, "spark://10.0.0.5:7077", "file:///")
    assert caught.value.exit_code == 2
    assert "checkpoint_dir" in str(caught.value)
    assert "allow_local_checkpoint" in str(caught.value)


def test_a_local_checkpoint_is_fine_locally_shared_or_allowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    local = str(tmp_path / "ckpt")
    check_checkpoint_location(_located(local), "local[2]", "file:///")
    check_checkpoint_location(_located("hdfs:///ckpt"), "yarn", "file:///")
    check_checkpoint_location(_located(local), "yarn", "hdfs://namenode:8020")
    check_checkpoint_location(_located(local, allow=True), "spark://h:7077", "file:///")
    assert "every node mounts it" in caplog.text


def test_run_refuses_a_local_checkpoint_with_a_cluster_master_before_spark_starts(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    args = ["--master", "spark://127.0.0.1:7077", "--checkpoint-dir", str(tmp_path / "c")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMING_APP_")}
    result = subprocess.run(
        [sys.executable, "-m", "streaming_app", "run", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "checkpoint_dir" in result.stderr and "--allow-local-checkpoint" in result.stderr
    assert "Creating new context" not in result.stderr


def test_a_file_uri_checkpoint_counts_as_local_and_submit_args_name_the_master(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streaming_app.lifecycle.checks import effective_master

    with pytest.raises(ConfigError):
        check_checkpoint_location(_located(f"file://{tmp_path}"), "spark://h:7077", "hdfs://n")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master spark://h:7077 --conf a=b pyspark-shell")
    assert effective_master(_located("c")) == ("spark://h:7077", "file:///")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    assert effective_master(_located("c"))[0] == "local[2]"


@pytest.mark.parametrize(
    ("name", "code"), [("SinkSetupError", EXIT_USAGE), ("SinkError", 1), ("CheckpointError", 3)]
)
def test_an_app_error_raised_in_a_batch_keeps_its_message_and_exit_code(
    name: str, code: int
) -> None:
    from streaming_app.lifecycle.stopping import stream_failure

    text = (
        "org.apache.spark.SparkException: An exception was raised by Python:\n"
        "Traceback (most recent call last):\n"
        '  File "streaming_app/sinks/postgres/stream.py", line 1, in write_postgres\n'
        f"streaming_app.errors.{name}: PostgreSQL table wc has a text count column\n\n"
        "\tat org.apache.spark.streaming.api.python.TransformFunction.apply(X.scala:1)\n"
    )
    error = stream_failure(RuntimeError(text))
    assert type(error).__name__ == name
    assert str(error) == "PostgreSQL table wc has a text count column"
    assert error.exit_code == code


def test_the_jvm_pyspark_launches_compiles_with_c1_only_on_any_master(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyspark import java_gateway

    monkeypatch.delenv("STREAMING_APP_JVM_C1", raising=False)
    monkeypatch.setenv("STREAMING_APP_JVM_ARCHIVE", "0")
    show = [sys.executable, "-c", "import os; print(os.environ.get('JAVA_TOOL_OPTIONS'))"]
    found = {}
    for master in ("local[2]", "spark://h:7077"):
        command = [*show, "--master", master, "pyspark-shell"]
        with launching_jvm():
            child = java_gateway.Popen(command, env={"PATH": "/usr/bin"}, stdout=subprocess.PIPE)
        found[master] = child.communicate()[0].decode().strip()
    # On a cluster too: the driver JVM moves no rows there, and C2's compiling was most of
    # its CPU in a run's first minutes (docs/benchmarks-scale-out.md).
    c1 = "-XX:TieredStopAtLevel=1"
    assert found == {"local[2]": c1, "spark://h:7077": c1}
