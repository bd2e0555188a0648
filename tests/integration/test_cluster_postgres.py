"""Two workers staging into PostgreSQL on a host of its own; an executor killed mid-COPY.

Five hosts: the master, two workers (wa, wb), the driver (scripts/submit.sh, client mode,
files source, files and postgres sinks) and the PostgreSQL server. Each worker's executor
stages its partitions' rows over the network into the server's staging table, and the
driver merges them. One executor is killed (kill -9 of its JVM and its Python workers)
while its task is held inside its COPY: the server rolls the task's transaction back,
Spark runs the task again, the new attempt replaces what the killed one left, and the run
goes on without a restart. Every total is exact, and the staging table is empty at the end.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from pathlib import Path

import psycopg
import pytest

from streaming_app.settings.rules import STAGING_SUFFIX
from tests.integration.cluster_helpers import SubmittedApp
from tests.integration.cluster_hosts import HostCluster, submit_args
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for_totals
from tests.integration.netns import Host, Network
from tests.integration.pg_helpers import postgres_config, wait_for_pg_totals
from tests.integration.pg_host import pg_on
from tests.integration.test_cluster_partition import pids_on, wait_until
from tests.integration.test_postgres_staging import rows_held, sessions_waiting, staged_rows

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]
TABLE = "public.wc"
EXECUTOR = "streaming-app executor"


def kill_executor(host: Host) -> int:
    """kill -9 of a worker's executor: its JVM and the Python workers it started (the
    processes of the host's namespace; pkill would find the other host's too). How many."""
    killed = 0
    for pid in pids_on(host):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(p in command for p in (b"CoarseGrainedExecutorBackend", b"daemon")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
    return killed


def backends(dsn: str) -> set[int]:
    """The process ids of the server's sessions."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {int(row[0]) for row in conn.execute("SELECT pid FROM pg_stat_activity")}


def test_two_workers_stage_into_a_server_of_its_own_and_a_killed_executor_loses_nothing(
    network: Network, dirs: dict[str, Path], tmp_path: Path
) -> None:
    hosts = {name: network.add_host(name) for name in ("master", "wa", "wb", "driver", "pg")}
    rng = random.Random(61)
    texts = [make_text(rng, 40)]
    with pg_on(hosts["pg"]) as server:
        cluster = HostCluster(tmp_path / "cluster", hosts["master"], [hosts["wa"], hosts["wb"]])
        cluster.start()
        config = postgres_config(tmp_path, server.dsn())
        run_args = files_args(
            dirs, "--allow-local-checkpoint", "--sink", "postgres", "--postgres-table", TABLE,
            "--config", str(config), "--batch-interval", "4", "--checkpoint-interval", "8",
            "--snapshot-interval", "40",
        )  # fmt: skip
        args = submit_args(cluster, hosts["driver"])
        app = SubmittedApp(args, run_args, tmp_path, "submit", on=hosts["driver"])
        try:
            with cluster.logs_on_failure():
                app.wait_for_log(r"Started new streaming context", timeout=180)
                drop_file(dirs["input"], "a.txt", texts[0].encode())
                wait_for_pg_totals(server.local_dsn, TABLE, truth(texts), timeout=180)

                with rows_held(server.local_dsn, TABLE + STAGING_SUFFIX):
                    texts.append(make_text(rng, 40))
                    drop_file(dirs["input"], "b.txt", texts[-1].encode())
                    wait_until(
                        "a task held in its COPY",
                        lambda: sessions_waiting(server.local_dsn, EXECUTOR, "advisory"),
                        120,
                    )
                    waiting = sessions_waiting(server.local_dsn, EXECUTOR, "advisory")
                    held = {str(address) for _, address in waiting}
                    victim = next(h for h in ("wa", "wb") if hosts[h].address in held)
                    killed = {pid for pid, a in waiting if str(a) == hosts[victim].address}
                    assert kill_executor(hosts[victim]) >= 2  # the JVM, a Python worker
                # Its rows let through, the server finds the killed task's connection gone
                # and rolls its transaction back: its sessions end.
                wait_until(
                    "end of the killed executor's sessions",
                    lambda: not killed & backends(server.local_dsn),
                    120,
                )
                texts.append(make_text(rng, 40))
                drop_file(dirs["input"], "c.txt", texts[-1].encode())
                wait_for_pg_totals(server.local_dsn, TABLE, truth(texts), timeout=300)
                wait_for_totals(dirs["output"], truth(texts), app, timeout=120)
                assert app.proc.poll() is None, "the run ended: " + app.log()[-3000:]
                assert staged_rows(server.local_dsn, TABLE) == 0
                assert app.terminate(timeout=200) == 0, app.log()[-4000:]
        finally:
            app.stop_if_running()
            cluster.stop()
    left = {name: pids_on(host) for name, host in hosts.items()}
    assert not any(left.values()), left
