"""A Spark standalone cluster on namespace hosts: the master on one, each worker on its own.

Each daemon binds and advertises its host's address (`--host`), with no SPARK_LOCAL_IP, as
on machines of their own. The root namespace has no route to the hosts, so the master's
JSON is fetched on the master's host; the workers' directories (executors' logs, an
application's files) are read through the shared file system.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.integration.cluster_helpers import SPARK_HOME, Cluster, tail
from tests.integration.netns import Host

MASTER_PORT = 7077
MASTER_UI_PORT = 8080
WORKER_PORT = 7078
WORKER_UI_PORT = 8081
# Run on a host: print the JSON at argv[1] (no proxy: the address is the test's own).
_FETCH = """
import sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
with opener.open(sys.argv[1], timeout=10) as response:
    sys.stdout.write(response.read().decode())
"""
_RUNNING = re.compile(r"Running task \S+ in stage \S+ \(TID (\d+)\)")
_FINISHED = re.compile(r"Finished task \S+ in stage \S+ \(TID (\d+)\)")


def _alive(master_json: Any) -> set[str]:
    """The addresses of the workers a master's UI JSON counts ALIVE."""
    return {w["host"] for w in master_json["workers"] if w["state"] == "ALIVE"}


class HostCluster(Cluster):
    """A master on `master` and one worker (`cores` cores, 2 by default; 1 GiB) on each host
    of `workers`.

    `conf_dir` is the daemons' SPARK_CONF_DIR (its spark-defaults.conf and spark-env.sh),
    in place of an empty one; its settings then stand alone, the REST submission server's
    included. `env` adds to the daemons' environment (a secret file for spark-env.sh).
    """

    def __init__(
        self,
        workdir: Path,
        master: Host,
        workers: Sequence[Host],
        master_opts: str = "",
        conf_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        cores: int = 2,
    ) -> None:
        super().__init__(workdir)
        self.cores = cores
        self.master_host = master
        self.workers = {host.name: host for host in workers}
        self.env.pop("SPARK_LOCAL_IP")
        if conf_dir is not None:
            self.env["SPARK_CONF_DIR"] = str(conf_dir)
            self.env["SPARK_MASTER_OPTS"] = ""
        self.env["SPARK_MASTER_OPTS"] = f"{self.env['SPARK_MASTER_OPTS']} {master_opts}".strip()
        self.env.update(env or {})

    def worker_dir(self, name: str) -> Path:
        """The work directory of a worker: its executors' app-*/<id>/stderr."""
        return self.work_dir / name

    def _spark_class(self, name: str, log_path: Path, *args: str) -> subprocess.Popen[bytes]:
        host = self.master_host if name == "master" else self.workers[name]
        with open(log_path, "wb") as log:
            # The network kills its group at the end, whatever the test did.
            proc: subprocess.Popen[bytes] = host.popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
            )
        self.procs[name] = proc
        return proc

    def start(self, timeout: float = 120) -> None:
        """Start the master, then the workers; return once every worker is ALIVE."""
        deadline = time.monotonic() + timeout
        address = self.master_host.address
        self._spark_class(
            "master",
            self.master_log,
            "org.apache.spark.deploy.master.Master",
            "--host", address,
            "--port", str(MASTER_PORT),
            "--webui-port", str(MASTER_UI_PORT),
        )  # fmt: skip
        self.master_url = self._wait_log(
            self.master_log, r"Starting Spark master at (spark://\S+)", deadline
        )
        self.master_ui = int(self._wait_log(self.master_log, r"'MasterUI' on port (\d+)", deadline))
        for name, host in self.workers.items():
            self.worker_dir(name).mkdir(parents=True, exist_ok=True)
            self._spark_class(
                name,
                self.workdir / f"{name}.log",
                "org.apache.spark.deploy.worker.Worker",
                "--host", host.address,
                "--port", str(WORKER_PORT),
                "--webui-port", str(WORKER_UI_PORT),
                "--cores", str(self.cores),
                "--memory", "1g",
                "--work-dir", str(self.worker_dir(name)),
                self.master_url,
            )  # fmt: skip
        # A UI that has just bound its port may answer 404 for a moment (seen in CI): not
        # yet, until the deadline.
        while True:
            found, error = self._read_master_json()
            if found is not None and len(_alive(found)) >= len(self.workers):
                break
            last = error.strip().splitlines()[-1:] if found is None else []
            self._check_alive(deadline, f"not every worker ALIVE on the master {last}")
            time.sleep(0.5)

    def _read_master_json(self) -> tuple[Any, str]:
        """The master web UI's JSON, or None and what the read said."""
        url = f"http://127.0.0.1:{self.master_ui}/json/"
        done = self.master_host.run([sys.executable, "-c", _FETCH, url], timeout=60)
        if done.returncode != 0:
            return None, done.stderr
        try:
            return json.loads(done.stdout), ""
        except ValueError:  # a page, not the JSON
            return None, done.stdout[:300]

    def master_json(self) -> Any:
        """The master web UI's JSON (workers, activeapps, completedapps), read on its host's
        loopback, where an operator reads it (conf/secure keeps the UI there)."""
        found, error = self._read_master_json()
        assert found is not None, error
        return found

    def alive_workers(self) -> set[str]:
        """The addresses of the workers the master counts ALIVE."""
        return _alive(self.master_json())

    def executor_logs(self, name: str) -> str:
        """Everything the executors on worker `name` logged (stderr), one after the other."""
        paths = sorted(self.worker_dir(name).glob("app-*/*/stderr"))
        return "".join(path.read_text("utf-8", errors="replace") for path in paths)

    def ran_a_task(self, name: str) -> bool:
        """Whether an executor on worker `name` has finished a task."""
        return "Finished task" in self.executor_logs(name)

    def running_tasks(self, name: str) -> set[str]:
        """The task ids an executor on worker `name` has started and not yet finished."""
        text = self.executor_logs(name)
        return set(_RUNNING.findall(text)) - set(_FINISHED.findall(text))

    def logs(self) -> str:
        """The tails of the master's and the workers' logs, for assertion messages."""
        parts = [f"--- master log ({self.master_log}):\n{tail(self.master_log)}"]
        for name in self.workers:
            path = self.workdir / f"{name}.log"
            parts.append(f"--- {name} log ({path}):\n{tail(path)}")
        return "\n".join(parts)


def submit_args(cluster: HostCluster, driver: Host) -> list[str]:
    """spark-submit's options for a driver on `driver` with both workers' executors."""
    return [
        "--master", cluster.master_url,
        "--conf", f"spark.driver.host={driver.address}",
        "--conf", "spark.ui.enabled=false",
        # The state has as many partitions as there are cores when the context is created:
        # wait for both executors (the ratio counts against spark.cores.max), so that it
        # has four, and each worker holds some of them.
        "--conf", "spark.cores.max=4",
        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1",
        "--executor-memory", "512m",  # fits a worker's 1 GiB
    ]  # fmt: skip
