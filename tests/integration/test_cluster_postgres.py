"""Two workers staging into PostgreSQL on a host of its own: an executor killed mid-COPY;
the structured engine's driver killed mid-micro-batch.

Five hosts: the master, two workers (wa, wb), the driver (scripts/submit.sh, client mode,
files source, files and postgres sinks) and the PostgreSQL server. Each worker's executor
stages its partitions' rows over the network into the server's staging table, and the
driver merges them. One executor is killed (kill -9 of its JVM and its Python workers)
while its task is held inside its COPY: the server rolls the task's transaction back,
Spark runs the task again, the new attempt replaces what the killed one left, and the run
goes on without a restart. Every total is exact, and the staging table is empty at the end.
The structured engine (`--engine structured`) on the same hosts: its driver killed (kill -9
of the spark-submit session) after Spark planned a micro-batch and before PostgreSQL had
it, then submitted again; it recovers the query and replays that micro-batch, and every
total is exact.
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
from tests.integration.harness import drop_file, make_text, truth, wait_for, wait_for_totals
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED
from tests.integration.netns import Host, Network
from tests.integration.pg_helpers import postgres_config, wait_for_pg_totals
from tests.integration.pg_host import pg_on
from tests.integration.test_cluster_partition import pids_on
from tests.integration.test_postgres_staging import rows_held, sessions_waiting, staged_rows
from tests.integration.test_structured_postgres import recorded_batch, structured_pg_args

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
                    wait_for(
                        "a task held in its COPY",
                        lambda: sessions_waiting(server.local_dsn, EXECUTOR, "advisory"),
                        120,
                        pause=0.5,
                    )
                    waiting = sessions_waiting(server.local_dsn, EXECUTOR, "advisory")
                    held = {str(address) for _, address in waiting}
                    victim = next(h for h in ("wa", "wb") if hosts[h].address in held)
                    killed = {pid for pid, a in waiting if str(a) == hosts[victim].address}
                    assert kill_executor(hosts[victim]) >= 2  # the JVM, a Python worker
                # Its rows let through, the server finds the killed task's connection gone
                # and rolls its transaction back: its sessions end.
                wait_for(
                    "end of the killed executor's sessions",
                    lambda: not killed & backends(server.local_dsn),
                    120,
                    pause=0.5,
                )
                # b.txt's batch exact by itself: the next batch writes again the total of
                # every word it changes (c.txt has them all), which would hide a partition
                # of this batch that the killed task's retry did not stage.
                wait_for_pg_totals(server.local_dsn, TABLE, truth(texts), timeout=180)
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


def last_id(directory: Path) -> int:
    """The highest micro-batch id in a structured checkpoint's offsets/ or commits/ (-1)."""
    names = directory.iterdir() if directory.is_dir() else ()
    return max((int(p.name) for p in names if p.name.isdigit()), default=-1)


def in_flight(checkpoint: Path, name: str, dsn: str, table: str) -> int | None:
    """The micro-batch that reads input file `name` if it is planned (Spark's file source
    lists it in `sources/0/<id>`) and neither Spark's commits log nor PostgreSQL's progress
    row has it yet; else None."""
    planned = last_id(checkpoint / "offsets")
    listed = checkpoint / "sources" / "0" / str(planned)
    try:
        reads = name in listed.read_text("utf-8")
    except OSError:  # not written yet
        return None
    if reads and last_id(checkpoint / "commits") < planned and recorded_batch(dsn, table) < planned:
        return planned
    return None


def test_the_structured_engine_on_two_workers_into_postgres_through_a_driver_kill(
    network: Network, dirs: dict[str, Path], tmp_path: Path
) -> None:
    hosts = {name: network.add_host(name) for name in ("master", "wa", "wb", "driver", "pg")}
    rng = random.Random(2055)
    texts = [make_text(rng, 20)]
    checkpoint = dirs["checkpoint"]
    with pg_on(hosts["pg"]) as server:
        cluster = HostCluster(tmp_path / "cluster", hosts["master"], [hosts["wa"], hosts["wb"]])
        cluster.start()
        run_args = structured_pg_args(
            dirs, server.dsn(), TABLE, "--allow-local-checkpoint", "--batch-interval", "2",
            "--snapshot-keep", "0",
        )  # fmt: skip
        # No wait for a cached block's executor (Spark's 3 s): with quick tasks the
        # scheduler would keep every partition on one worker.
        args = [*submit_args(cluster, hosts["driver"]), "--conf", "spark.locality.wait=0s"]
        started: list[SubmittedApp] = []

        def submit() -> SubmittedApp:
            started.append(SubmittedApp(args, run_args, tmp_path, f"submit{len(started) + 1}",
                                        on=hosts["driver"]))  # fmt: skip
            return started[-1]

        try:
            with cluster.logs_on_failure():
                app = submit()
                app.wait_for_log(QUERY_STARTED, timeout=240)
                drop_file(dirs["input"], "a.txt", texts[0].encode())
                wait_for_pg_totals(server.local_dsn, TABLE, truth(texts), timeout=240)

                # kill -9 while the micro-batch that reads b.txt runs: after Spark planned
                # it, before PostgreSQL has it.
                texts.append(make_text(rng, 20))
                drop_file(dirs["input"], "b.txt", texts[-1].encode())
                wait_for(
                    "the micro-batch of b.txt in flight",
                    lambda: in_flight(checkpoint, "b.txt", server.local_dsn, TABLE) is not None,
                    240,
                    pause=0.01,
                )
                app.kill9()
                killed = in_flight(checkpoint, "b.txt", server.local_dsn, TABLE)
                assert killed is not None, "the kill did not land inside the micro-batch"

                app = submit()
                app.wait_for_log(QUERY_RECOVERED, timeout=240)
                assert "Started new query" not in app.log()
                # Words b.txt does not have: only the replayed micro-batch writes its words.
                texts.append("after the restart\n")
                drop_file(dirs["input"], "c.txt", texts[-1].encode())
                wait_for_pg_totals(server.local_dsn, TABLE, truth(texts), timeout=240)
                assert recorded_batch(server.local_dsn, TABLE) > killed
                assert staged_rows(server.local_dsn, TABLE) == 0
                assert app.terminate(timeout=200) == 0, app.log()[-4000:]
                for name in cluster.workers:
                    assert cluster.ran_a_task(name), f"no task ran on {name}"
        finally:
            for submitted in started:
                submitted.stop_if_running()
            cluster.stop()
    left = {name: pids_on(host) for name, host in hosts.items()}
    assert not any(left.values()), left
