"""A Spark standalone cluster (master + one worker) on loopback, and apps submitted to it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark

from streaming_app.tools.processes import stop_group
from tests.integration.harness import App, free_port
from tests.integration.netns import Host

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent

# No proxy, whatever the environment says: every request here goes to 127.0.0.1.
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get_json(port: int, path: str = "/json/") -> Any:
    """GET a Spark web UI's JSON on 127.0.0.1."""
    with _LOOPBACK.open(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return json.load(response)


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file, for assertion messages."""
    try:
        return path.read_text("utf-8", errors="replace")[-chars:]
    except FileNotFoundError:
        return "(no log)"


class Cluster:
    """A standalone master and one worker (2 cores, 1 GiB) from the pip-installed PySpark."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.work_dir = workdir / "worker-work"  # executors' app-*/<id>/stderr land here
        self.master_log = workdir / "master.log"
        self.worker_log = workdir / "worker.log"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.master_url = ""
        self.master_ui = 0
        self.worker_ui = 0
        conf_dir = workdir / "spark-conf"  # empty: Spark's default INFO log, no spark-env.sh
        for path in (conf_dir, self.work_dir, workdir / "spark-logs", workdir / "spark-pids"):
            path.mkdir(parents=True, exist_ok=True)
        self.env = dict(
            os.environ,
            SPARK_HOME=str(SPARK_HOME),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_WORKER_DIR=str(self.work_dir),
            SPARK_LOG_DIR=str(workdir / "spark-logs"),
            SPARK_PID_DIR=str(workdir / "spark-pids"),
            SPARK_DAEMON_MEMORY="512m",
            # No REST submission server (port 6066): nothing listens that the test does not use.
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
            PYSPARK_PYTHON=sys.executable,
        )

    def _spark_class(self, name: str, log_path: Path, *args: str) -> subprocess.Popen[bytes]:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,  # its own process group, stopped by stop()
            )
        self.procs[name] = proc
        return proc

    def start(self, timeout: float = 120) -> None:
        """Start the master, then the worker; return once the worker is ALIVE on the master."""
        deadline = time.monotonic() + timeout
        self._spark_class(
            "master",
            self.master_log,
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1",
            "--port", str(free_port()),
            "--webui-port", str(free_port()),
        )  # fmt: skip
        # The ports actually bound (Spark moves to the next port if one was taken meanwhile).
        self.master_url = self._wait_log(
            self.master_log, r"Starting Spark master at (spark://\S+)", deadline
        )
        self.master_ui = int(self._wait_log(self.master_log, r"'MasterUI' on port (\d+)", deadline))
        self._spark_class(
            "worker",
            self.worker_log,
            "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1",  # binds and advertises loopback
            "--port", str(free_port()),
            "--webui-port", str(free_port()),
            "--cores", "2",
            "--memory", "1g",
            "--work-dir", str(self.work_dir),
            self.master_url,
        )  # fmt: skip
        self.worker_ui = int(self._wait_log(self.worker_log, r"'WorkerUI' on port (\d+)", deadline))
        while not any(w["state"] == "ALIVE" for w in self._workers_once_served()):
            self._check_alive(deadline, "no ALIVE worker on the master")
            time.sleep(0.3)

    def _workers_once_served(self) -> list[Any]:
        """The master's workers; none while its UI does not serve its JSON yet (a UI that
        has just bound its port may answer 404 for a moment, as a host cluster's did in
        CI)."""
        try:
            workers: list[Any] = self.master_json()["workers"]
        except OSError:  # urllib's HTTPError and URLError
            return []
        return workers

    def _wait_log(self, log_path: Path, pattern: str, deadline: float) -> str:
        """The first group of `pattern` in a log, once it appears."""
        while True:
            match = re.search(pattern, log_path.read_text("utf-8", errors="replace"))
            if match:
                return match.group(1)
            self._check_alive(deadline, f"no {pattern!r} in {log_path.name}")
            time.sleep(0.2)

    def _check_alive(self, deadline: float, what: str) -> None:
        for name, proc in self.procs.items():
            assert proc.poll() is None, f"the {name} exited {proc.returncode}\n{self.logs()}"
        assert time.monotonic() < deadline, f"{what} in time\n{self.logs()}"

    def master_json(self) -> Any:
        """The master web UI's JSON: workers, activeapps, completedapps."""
        return get_json(self.master_ui)

    def worker_json(self) -> Any:
        """The worker web UI's JSON: executors (running) and finishedexecutors."""
        return get_json(self.worker_ui)

    def logs(self) -> str:
        """The tails of the master and worker logs, for assertion messages."""
        return (
            f"--- master log ({self.master_log}):\n{tail(self.master_log)}\n"
            f"--- worker log ({self.worker_log}):\n{tail(self.worker_log)}"
        )

    @contextlib.contextmanager
    def logs_on_failure(self) -> Iterator[None]:
        """Append the master and worker log tails to any assertion failing inside."""
        try:
            yield
        except AssertionError as exc:
            exc.args = (f"{exc}\n{self.logs()}",)
            raise

    def stop(self) -> None:
        """Stop the worker, then the master (their process groups only)."""
        for proc in reversed(self.procs.values()):
            stop_group(proc, grace=15)


def script_env(loopback: bool = True) -> dict[str, str]:
    """Environment for scripts/submit.sh: this virtualenv, no stray settings, and Spark on
    loopback (`loopback`) or left to find its address as on a host of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("STREAMING_APP_") and k != "SPARK_LOCAL_IP"
    }
    env.update(STREAMING_APP_VENV=sys.prefix, PYTHONUNBUFFERED="1")
    if loopback:
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


class SubmittedApp(App):
    """`scripts/submit.sh SUBMIT_ARGS -- RUN_ARGS` in its own session (`env`: added to
    script_env's, STREAMING_APP_* included).

    The session leader is spark-submit's JVM, which is also the driver's JVM (py4j); the
    Python driver is its child. App's kill9/wait/log/wait_for_log apply unchanged.
    """

    def __init__(
        self,
        submit_args: list[str],
        run_args: list[str],
        workdir: Path,
        name: str,
        on: Host | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.log_path = self.out_path = workdir / f"{name}.log"
        # One file: spark-submit passes the Python driver's stderr on as its own stdout.
        self._log = self._out = open(self.log_path, "wb")  # noqa: SIM115 (closed in wait/kill)
        command = [str(ROOT / "scripts" / "submit.sh"), *submit_args, "--", *run_args]
        self.proc = subprocess.Popen(
            # On a host (`ip netns exec`, which execs): no SPARK_LOCAL_IP, as a user's shell.
            on.command(command) if on is not None else command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**script_env(loopback=on is None), **(env or {})},
            start_new_session=True,
        )

    def driver_pid(self) -> int:
        """The pid of the Python driver (spark_main.py) in this app's session."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.getsid(int(entry.name)) != self.proc.pid:
                    continue
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except (ProcessLookupError, FileNotFoundError, PermissionError):
                continue
            if any(arg.endswith(b"spark_main.py") for arg in cmdline) and b"java" not in cmdline[0]:
                return int(entry.name)
        raise AssertionError("no Python driver in the spark-submit session:\n" + self.log()[-3000:])

    def terminate(self, timeout: float = 120) -> int:
        """SIGTERM the Python driver and return spark-submit's exit code.

        The driver stops gracefully and exits 0, and spark-submit exits with its code.
        A SIGTERM to spark-submit's JVM instead leaves the stop to Spark's shutdown hook,
        and spark-submit exits 143.
        """
        os.kill(self.driver_pid(), signal.SIGTERM)
        return self.wait(timeout)
