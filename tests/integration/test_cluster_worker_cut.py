"""A worker cut off from the driver and the master until its executor is lost, then healed.

Four hosts: the master, two workers (wa, wb) and the driver (scripts/submit.sh, client
mode, files source and sink; every host shares this machine's file system, as a
cluster's nodes share a mount). wb is cut while the app holds state partitions on both
workers and a file waits to be counted: the batch stalls on wb until the master, with a
20 s worker timeout, drops it (or the driver, with a 30 s network timeout, misses its
executor's heartbeats), and the driver logs its executor lost; wa reruns the lost
tasks and Spark recomputes wb's state partitions from the checkpoint. Then wb is healed:
it registers again and gets a new executor for the app; a last file is counted.
Every total is exact after each step and at the end; the driver said what happened in
one line, with no trace.
This is CI's cut between a worker and the driver; test_cluster_partition.py's longer
runs (`slow`) add the Kafka source, a cut of the last worker and of the driver.
"""

from __future__ import annotations

import random
import re
import time
from functools import partial
from pathlib import Path

import pytest

from tests.integration.cluster_helpers import SubmittedApp
from tests.integration.cluster_hosts import HostCluster, submit_args
from tests.integration.conftest import files_args
from tests.integration.harness import (
    cli_totals,
    drop_file,
    make_text,
    output_without_traces,
    truth,
    wait_for,
    wait_for_totals,
)
from tests.integration.netns import Network
from tests.integration.test_cluster_partition import pids_on

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]
# The master's worker timeout (Spark's default: 60 s). A worker heartbeats every quarter
# of it and the master looks once a timeout: dropped 20-40 s after the cut.
WORKER_TIMEOUT = 20
# The driver's and executors' network timeout (Spark's default: 120 s): a shuffle fetch
# or a call to the cut worker's executor that was under way gives up after it, and the
# driver, looking every 10 s (default 60 s, at most the timeout), may count the executor
# lost by its missed heartbeats first (the one line says which).
# And no wait for a cached block's executor (Spark's default: 3 s): with quick tasks the
# scheduler would otherwise keep every state partition on the executor that first held
# it, and the cut worker might hold none.
SPARK_CONF = (
    "spark.network.timeout=30s",
    "spark.network.timeoutInterval=10s",
    "spark.locality.wait=0s",
)
LOST_REASON = r"(worker lost|Executor heartbeat timed out)"


def executors_on(cluster: HostCluster, name: str) -> set[Path]:
    """The directories of the executors a worker has started (any application's)."""
    return set(cluster.worker_dir(name).glob("app-*/*/"))


def registered(executors: set[Path]) -> bool:
    """Whether one of these executors has registered with the driver (its stderr says so)."""
    return any(
        "Successfully registered with driver" in (path / "stderr").read_text("utf-8", "replace")
        for path in executors
        if (path / "stderr").exists()
    )


def test_a_worker_cut_until_its_executor_is_lost_then_healed_loses_nothing(
    network: Network, dirs: dict[str, Path], tmp_path: Path
) -> None:
    hosts = {name: network.add_host(name) for name in ("master", "wa", "wb", "driver")}
    opts = f"-Dspark.worker.timeout={WORKER_TIMEOUT}"
    cluster = HostCluster(tmp_path / "cluster", hosts["master"], [hosts["wa"], hosts["wb"]], opts)
    rng = random.Random(2055)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, 30))
        drop_file(dirs["input"], name, texts[-1].encode())

    cluster.start()
    run_args = files_args(
        dirs, "--allow-local-checkpoint", "--stop-timeout", "120",
        "--batch-interval", "2", "--checkpoint-interval", "4", "--snapshot-interval", "40",
    )  # fmt: skip
    args = submit_args(cluster, hosts["driver"])
    for setting in SPARK_CONF:
        args += ["--conf", setting]
    app = SubmittedApp(args, run_args, tmp_path, "submit", on=hosts["driver"])
    wb = hosts["wb"].address
    try:
        with cluster.logs_on_failure():
            app.wait_for_log(r"Started new streaming context", timeout=180)
            add("a.txt")
            wait_for_totals(dirs["output"], truth(texts), app, timeout=180)
            # The state's four partitions are spread over both workers' executors.
            for name in cluster.workers:
                wait_for(f"a task on {name}", partial(cluster.ran_a_task, name), 120, pause=0.5)

            # wb cut off with a file to count: the batch waits for wb's state partitions
            # until the master drops wb and the driver reruns its tasks on wa.
            network.cut(hosts["wb"])
            cut = time.monotonic()
            add("b-while-cut.txt")
            wait_for(
                "wb dropped by the master",
                lambda: wb not in cluster.alive_workers(),
                180,
                pause=0.5,
            )
            dropped = time.monotonic()
            lost = rf"Lost executor \d+ on {re.escape(wb)}: {LOST_REASON}"
            app.wait_for_log(lost, timeout=90)
            wait_for_totals(dirs["output"], truth(texts), app, timeout=180)
            counted = time.monotonic()
            print(f"wb cut -> dropped {dropped - cut:.1f} s, -> counted {counted - cut:.1f} s")

            # wb healed: it registers again with the master, and the app gets an executor
            # on it that registers with the driver. (Whether that executor runs tasks is
            # the scheduler's choice: the state's partitions are cached on wa now.)
            before = executors_on(cluster, "wb")
            network.heal(hosts["wb"])
            wait_for("wb ALIVE again", lambda: wb in cluster.alive_workers(), 120, pause=0.5)
            wait_for(
                "a new executor on wb registered with the driver",
                lambda: registered(executors_on(cluster, "wb") - before),
                180,
                pause=0.5,
            )
            add("c-after-heal.txt")
            wait_for_totals(dirs["output"], truth(texts), app, timeout=120)
            assert app.terminate(timeout=200) == 0, app.log()[-4000:]
            assert cli_totals(tmp_path, dirs["output"], "totals") == truth(texts)
            output = output_without_traces(app)
            # The operator sees what happened in one line.
            assert re.search(r"ERROR TaskSchedulerImpl: " + lost, output), output[-4000:]
    finally:
        app.stop_if_running()
        cluster.stop()
    left = {name: pids_on(host) for name, host in hosts.items()}
    assert not any(left.values()), left
