"""The app as a subprocess: its arguments, its start, its metrics, kill -9 and a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from streaming_app.common.jvm_archive import ENV as ARCHIVE_ENV
from streaming_app.common.metrics_record import BatchMetrics, read_metrics
from streaming_app.tools.processes import kill_group, stop_group

BATCH_S = 2  # the batch interval of every run, in seconds
# Spark settings that keep a driver the harness starts itself on loopback.
LOOPBACK_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def poll_until(
    read: Any, done: Any, proc: subprocess.Popen[bytes], log: Path, timeout: float, what: str
) -> Any:
    """read() every 0.2 s until done(it) holds; raise with the log's tail if the process
    ends or the timeout passes first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = read()
        if done(found):
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:]
    code = proc.poll()
    why = f"ended (exit {code})" if code is not None else f"did not get there in {timeout} s"
    raise RuntimeError(f"{what} {why}:\n{tail}")


@dataclass
class AppRun:
    """One `streaming-app run` subprocess (own session: kill -9 takes its JVM too)."""

    proc: subprocess.Popen[bytes]
    metrics: Path
    log: Path
    started: float  # time.time() at spawn

    @classmethod
    def start(
        cls,
        workdir: Path,
        name: str,
        args: list[str],
        code: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> AppRun:
        """Spawn the app with its metrics file in workdir.

        code: another copy of the repository to run the app from (bench/compare.py).
        env: more environment (a password the app takes from STREAMING_APP_*).
        """
        metrics = workdir / f"{name}.metrics.jsonl"
        log = workdir / f"{name}.log"
        # Settings come from the benchmark's arguments alone. STREAMING_APP_JVM_ARCHIVE is no
        # setting (0: the JVM starts without the class archive); code of a revision before
        # the archive would refuse it as an unknown setting, and starts without one anyway.
        knows = code is None or (code / "streaming_app" / "common" / "jvm_archive.py").is_file()
        environ = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("STREAMING_APP_") or (k == ARCHIVE_ENV and knows)
        }
        environ.update(SPARK_LOCAL_IP="127.0.0.1", PYTHONUNBUFFERED="1", **(env or {}))
        if code is not None:
            environ["PYTHONPATH"] = str(code)
        with open(log, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "streaming_app", "run", *args,
                 "--metrics-file", str(metrics), "--no-progress"],
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                env=environ, start_new_session=True, cwd=code,
            )  # fmt: skip
        return cls(proc, metrics, log, time.time())

    def batches(self) -> list[BatchMetrics]:
        """The batches completed so far (by every run that appended to this file)."""
        if not self.metrics.exists():
            return []
        return read_metrics(self.metrics)[0]

    def wait_for(self, done: Any, timeout: float) -> list[BatchMetrics]:
        """Poll the metrics until done(batches) holds; raise with the log tail if not."""
        found: list[BatchMetrics] = poll_until(
            self.batches, done, self.proc, self.log, timeout, "benchmark run"
        )
        return found

    def kill9(self) -> None:
        """SIGKILL the driver and its JVM."""
        kill_group(self.proc)

    def stop(self) -> None:
        """SIGTERM the driver (graceful stop), then SIGKILL its session if it takes too long."""
        stop_group(self.proc, grace=120, leader_only=True)


def kafka_args(workdir: Path, bootstrap: str, topic: str, *extra: str) -> list[str]:
    """A Kafka-source run with 2 s batches and the console sink (its top 10 per batch)."""
    return [
        "--source", "kafka", "--bootstrap-servers", bootstrap, "--topics", topic,
        "--checkpoint-dir", str(workdir / "checkpoint"), "--batch-interval", str(BATCH_S),
        "--sink", "console", "--spark-conf", "spark.ui.enabled=false", *extra,
    ]  # fmt: skip


# The state checkpoint interval of the exact configuration, in batches: the app's default.
EXACT_CHECKPOINT_BATCHES = 10


def exact_args(run_dir: Path, checkpoint_batches: int = EXACT_CHECKPOINT_BATCHES) -> list[str]:
    """Added to kafka_args: the README's setup for exact totals, the files sink beside the
    console, with the defaults otherwise (a state checkpoint every 10 batches, snapshots at
    the same interval, 3 kept)."""
    return [
        "--sink", "files", "--output-dir", str(run_dir / "output"),
        "--checkpoint-interval", str(checkpoint_batches * BATCH_S),
    ]  # fmt: skip


def records_by_batch(metrics: Path) -> dict[int, int]:
    """Records per batch time; a batch re-run after a restart may say null: keep the known."""
    found: dict[int, int] = {}
    if not metrics.exists():
        return found
    for line in metrics.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by kill -9
        if isinstance(record.get("records"), int):
            found[record["batch_time_ms"]] = max(found.get(record["batch_time_ms"], 0),
                                                 record["records"])  # fmt: skip
    return found


def completed_since(start_ms: float, batches: list[BatchMetrics]) -> bool:
    """Whether a batch completed after start_ms."""
    return any(b.completed_ms > start_ms for b in batches)


def restart(
    workdir: Path, name: str, args: list[str], env: dict[str, str] | None = None
) -> tuple[AppRun, float]:
    """Start the app again (its metrics appended to the same file); it, and the seconds
    from its start to its first completed batch."""
    app = AppRun.start(workdir, name, args, env=env)
    start_ms = app.started * 1000
    try:
        batches = app.wait_for(partial(completed_since, start_ms), timeout=180)
    except BaseException:
        app.stop()  # the caller never gets it to stop
        raise
    return app, (
        min(b.completed_ms for b in batches if b.completed_ms > start_ms) - start_ms
    ) / 1000


def wait_for_counted(app: AppRun, lines: int, timeout: float) -> None:
    """Wait until the app's batches have read `lines` records in all."""
    app.wait_for(lambda _: sum(records_by_batch(app.metrics).values()) >= lines, timeout)
