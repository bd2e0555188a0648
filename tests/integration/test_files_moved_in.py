"""The files source counts every file moved in: a non-ASCII name under the POSIX locale,
and (DStreams) a file whose modification time is older than the stream's window."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster_helpers import ROOT, SPARK_HOME, Cluster, SubmittedApp, script_env
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for, wait_for_totals
from tests.integration.log_lines import CONTEXT_STARTED, QUERY_STARTED
from tests.integration.test_structured_engine import structured_args

pytestmark = pytest.mark.timeout(300)
# The POSIX locale, as in containers and under service managers: LANG alone would not do,
# LC_ALL overrides it.
POSIX = {"LC_ALL": "C", "LANG": "C"}
NON_ASCII = "ünïcode-1.txt"


def test_dstream_counts_a_non_ascii_file_name_under_the_posix_locale(
    dirs: dict[str, Path], start_app: Any
) -> None:
    rng = random.Random(55)
    app = start_app(*files_args(dirs), env=POSIX)
    app.wait_for_log(CONTEXT_STARTED)
    texts = [make_text(rng, 20), make_text(rng, 20)]
    drop_file(dirs["input"], NON_ASCII, texts[0].encode())
    drop_file(dirs["input"], "ascii-2.txt", texts[1].encode())
    wait_for_totals(dirs["output"], truth(texts), app)
    assert app.terminate() == 0


def test_spark_submit_under_the_posix_locale_refuses_the_files_source_in_one_line(
    dirs: dict[str, Path],
) -> None:
    """spark-submit run by hand (not scripts/submit.sh) launches the driver JVM itself, in the
    caller's locale: the app cannot change it and refuses before reading anything."""
    env = {**script_env(), **POSIX, "PYSPARK_PYTHON": sys.executable}
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]"]
    # A run that is not refused ends by itself soon.
    run_args = files_args(dirs, "--duration", "5")
    command += [str(ROOT / "scripts" / "spark_main.py"), "run", *run_args]
    # spark-submit passes the Python driver's stderr on as its own stdout.
    done = subprocess.run(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240
    )
    assert done.returncode == 2, done.stdout[-3000:]
    refusal = "the driver JVM decodes file names as ANSI_X3.4-1968 (its locale is not UTF-8)"
    assert refusal in done.stdout, done.stdout[-3000:]
    assert "Traceback" not in done.stdout, done.stdout[-3000:]


@pytest.mark.cluster
def test_a_cluster_counts_a_non_ascii_file_name_under_the_posix_locale(
    dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Master, worker (and so its executors) and scripts/submit.sh all under LC_ALL=C: the
    executors open the file by a name that is not ASCII too."""
    rng = random.Random(59)
    cluster = Cluster(tmp_path / "cluster")
    cluster.env.update(POSIX)
    run_args = files_args(dirs, "--allow-local-checkpoint", "--batch-interval", "2")
    app = None
    try:
        cluster.start()
        submit_args = [
            "--master", cluster.master_url, "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.driver.bindAddress=127.0.0.1", "--executor-memory", "512m",
        ]  # fmt: skip
        with cluster.logs_on_failure():
            app = SubmittedApp(submit_args, run_args, tmp_path, "submit", env=POSIX)
            app.wait_for_log(CONTEXT_STARTED, timeout=150)
            texts = [make_text(rng, 20), make_text(rng, 20)]
            drop_file(dirs["input"], NON_ASCII, texts[0].encode())
            drop_file(dirs["input"], "ascii-2.txt", texts[1].encode())
            wait_for_totals(dirs["output"], truth(texts), app, timeout=150)
            assert app.terminate() == 0
    finally:
        if app is not None:
            app.stop_if_running()
        cluster.stop()


def test_structured_counts_a_non_ascii_file_name_under_the_posix_locale(
    dirs: dict[str, Path], start_app: Any
) -> None:
    rng = random.Random(56)
    texts = [make_text(rng, 20)]
    drop_file(dirs["input"], NON_ASCII, texts[0].encode())  # read by the first micro-batch
    app = start_app(*structured_args(dirs), env=POSIX)
    app.wait_for_log(QUERY_STARTED)
    texts.append(make_text(rng, 20))
    drop_file(dirs["input"], "ascii-2.txt", texts[1].encode())
    wait_for_totals(dirs["output"], truth(texts), app)
    assert app.terminate() == 0


def read_or_empty(path: Path) -> str:
    """A file's text, or "" if it went meanwhile."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def drop_late(input_dir: Path, rng: random.Random, name: str) -> list[str]:
    """A file written two hours ago and then moved in (`mv` keeps its time); its text."""
    text = make_text(rng, 20)
    two_hours_ago = int(time.time() * 1000) - 2 * 3600 * 1000
    drop_file(input_dir, name, text.encode(), mtime_ms=two_hours_ago)
    return [text]


def test_dstream_counts_files_moved_in_with_a_modification_time_two_hours_old_once(
    dirs: dict[str, Path], start_app: Any
) -> None:
    """Each named in a warning and made new: one just before a kill -9, one after the
    restart, when the snapshot writer has pruned the input-files log (the snapshot's list
    of files then says what was read); each counted once."""
    rng = random.Random(57)
    # One snapshot kept: the next snapshot prunes the log entries before it. Two-second
    # batches: fewer to replay after the kill.
    args = files_args(
        dirs, "--snapshot-keep", "1", "--batch-interval", "2", "--checkpoint-interval", "4"
    )
    app = start_app(*args)
    app.wait_for_log(CONTEXT_STARTED)
    texts = [make_text(rng, 20)]
    drop_file(dirs["input"], "fresh.txt", texts[0].encode())
    wait_for_totals(dirs["output"], truth(texts), app)
    log_dir = dirs["checkpoint"] / "input-files"

    def start_entry_pruned() -> bool:
        return not any("present-at-start" in read_or_empty(p) for p in log_dir.glob("[0-9]*"))

    wait_for("the start's entry pruned", start_entry_pruned, 90, app)
    texts += drop_late(dirs["input"], rng, "before-kill.txt")
    app.wait_for_log(r"source: before-kill\.txt in \S+ was moved in with a modification time")
    app.kill9()

    second = start_app(*args)
    second.wait_for_log(r"Recovered streaming context from checkpoint")
    # A file made new is selected by the first batch whose time is after that: once the
    # batches replayed after the kill are done.
    second.wait_caught_up()
    texts += drop_late(dirs["input"], rng, "after-restart.txt")
    wait_for_totals(dirs["output"], truth(texts), second)
    second.wait_for_log(r"source: after-restart\.txt in \S+ was moved in with a modification")
    assert second.terminate() == 0


def test_structured_counts_a_file_moved_in_with_a_modification_time_two_hours_old(
    dirs: dict[str, Path], start_app: Any
) -> None:
    """Spark's file source reads it as it is (its maxFileAge, 7 days from the newest file)."""
    app = start_app(*structured_args(dirs))
    app.wait_for_log(QUERY_STARTED)
    rng = random.Random(58)
    texts = [make_text(rng, 20)]
    drop_file(dirs["input"], "fresh.txt", texts[0].encode())
    texts += drop_late(dirs["input"], rng, "written-earlier.txt")
    wait_for_totals(dirs["output"], truth(texts), app)
    assert app.terminate() == 0
