"""scripts/submit.sh against a real standalone cluster: kill -9 of the driver, exact totals."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming_app.common.jvm_jit import C1_ONLY
from tests.integration.batch_waits import wait_more_batches
from tests.integration.cluster_helpers import Cluster, SubmittedApp
from tests.integration.conftest import files_args
from tests.integration.harness import (
    drop_file,
    drop_file_for_next_batch,
    make_text,
    truth,
    wait_for,
    wait_for_totals,
)
from tests.integration.replay_kills import kill_after_writing, logged_files, wait_replayed

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A master and one worker on 127.0.0.1, stopped (process groups) after the test."""
    spark = Cluster(tmp_path / "cluster")
    try:
        spark.start()
        yield spark
    finally:
        spark.stop()


def totals_command(output_dir: Path) -> dict[str, int]:
    """The totals as `streaming-app totals` prints them (word<TAB>count lines)."""
    result = subprocess.run(
        [sys.executable, "-m", "streaming_app", "totals", "--output-dir", str(output_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    pairs = (line.rsplit("\t", 1) for line in result.stdout.splitlines())
    return {word: int(count) for word, count in pairs}


def test_kill_9_of_a_cluster_driver_then_totals_equal_ground_truth(
    dirs: dict[str, Path], cluster: Cluster, tmp_path: Path
) -> None:
    rng = random.Random(7077)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, rng.randint(20, 60)))
        drop_file(dirs["input"], name, texts[-1].encode())

    submit_args = [
        "--master", cluster.master_url,  # client mode: the driver runs here
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--executor-memory", "512m",  # fits the worker's 1 GiB
    ]  # fmt: skip
    # The checkpoint, input and output directories are local paths, which the app refuses
    # with a cluster master unless allowed: the master, the worker (its executors write
    # state checkpoints and read input) and the driver all share this machine's filesystem,
    # as every node of a real cluster would have to share a mount.
    run_args = files_args(
        dirs,
        "--allow-local-checkpoint",
        # A batch on the cluster takes most of a second on two shared cores, so with
        # one-second batches the batches replayed after the down time would barely catch up.
        "--batch-interval", "2",
        "--checkpoint-interval", "4",
        # The graceful stop finishes every batch generated so far; never cut it short here.
        "--stop-timeout", "90",
        "--log-level", "debug",  # the files sink's line for each batch written
    )  # fmt: skip
    started: list[SubmittedApp] = []

    def submit() -> SubmittedApp:
        app = SubmittedApp(submit_args, run_args, tmp_path, f"submit{len(started) + 1}")
        started.append(app)
        return app

    def active_apps() -> list[str]:
        return [a["id"] for a in cluster.master_json()["activeapps"]]

    try:
        with cluster.logs_on_failure():
            app = submit()
            app.wait_for_log(r"Started new streaming context", timeout=150)
            add("c1-a.txt")
            add("c1-b.txt")
            wait_for_totals(dirs["output"], truth(texts), app, timeout=150)
            (first_id,) = active_apps()

            # kill -9 (the whole spark-submit session: the Python driver and its JVM) right
            # after the output of the batch that read c1-c.txt (checked in the files
            # source's log), so that the resubmitted driver replays it: the replay must
            # read the file again, the restored state does not hold it.
            texts.append(make_text(rng, rng.randint(20, 60)))
            batch = drop_file_for_next_batch(dirs["input"], "c1-c.txt", texts[-1].encode(), 2000)
            kill_after_writing(app, batch)
            assert logged_files(dirs["checkpoint"], batch) == ["c1-c.txt"]
            # The master notices the driver is gone and has the worker kill its executors,
            # which frees the worker's cores for the resubmitted app.
            wait_for(
                "the killed app to leave the master",
                lambda: first_id not in active_apps(),
                pause=0.5,
            )
            wait_for(
                "the killed app's executors to end",
                lambda: not cluster.worker_json()["executors"],
                pause=0.5,
            )
            add("c2-while-down.txt")

            app = submit()
            assert wait_replayed(app, batch), f"batch_time_ms={batch} was not replayed"
            assert "Creating new context" not in app.log(), "the factory ran on recovery"
            add("c2-a.txt")
            wait_for_totals(dirs["output"], truth(texts), app, timeout=150)
            (second_id,) = active_apps()
            # Some more batches run: a replay would show as doubled totals now.
            wait_more_batches(app)
            wait_for_totals(dirs["output"], truth(texts), app, timeout=5)

            assert app.terminate() == 0, app.log()[-4000:]
            assert totals_command(dirs["output"]) == truth(texts)

            # It really ran on the cluster: both applications registered with the master
            # and ended there, and each had an executor on the worker.
            assert f"master {cluster.master_url} comes from spark-submit" in app.log()
            wait_for("the stopped app to leave the master", lambda: not active_apps(), pause=0.5)
            completed = {a["id"]: a for a in cluster.master_json()["completedapps"]}
            for app_id in (first_id, second_id):
                assert completed[app_id]["name"] == "streaming-app", completed
                stderr = [p.read_text() for p in (cluster.work_dir / app_id).glob("*/stderr")]
                assert any("Finished task" in text for text in stderr), (
                    f"no executor of {app_id} ran a task in {cluster.work_dir}"
                )
                # The executors' JVMs compile with C1 only, after recovery too (jvm_jit.py).
                commands = [t.split("\n", 1)[0] for t in stderr]
                assert all(C1_ONLY in c for c in commands), commands
    finally:
        for started_app in started:
            started_app.stop_if_running()
