"""One run of the scale-out benchmark: the app on 1 or 2 workers, or plain Python in 1 or 2
processes, with every process's CPU seconds over its steady window.

The app: scripts/submit.sh on the driver's host (tests/integration/cluster_helpers.py's
SubmittedApp, imported: the cluster tests submit the same way), client mode, `spark.cores.max` = the
workers it may use (each worker has one core, so one executor a worker), Spark's event log
on; the exact configuration (Kafka source, 2 s batches capped at `batch_lines` lines,
console and files sinks, or console and postgres, state checkpoints and snapshots at
their defaults) reading a preloaded backlog. Its steady batches (bench/harness/rates.py's:
after 2 warm-up batches, before the last) give the words/s of processing, the CPU window
(from the first steady batch's start of processing to the last one's end) and the
timeline (bench/scale/event_log.py). Plain Python: bench/scale/plain.py's count on the
worker hosts, its window from the common start to the last process's end.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S, exact_args, kafka_args, poll_until
from bench.harness.corpus import WORDS_PER_LINE
from bench.harness.proc_cpu import CpuSampler, Samples, by_class, machine_busy_s, window_cpu
from bench.harness.rates import batch_figures, steady_batches
from bench.scale.event_log import batches, read_events, summary
from bench.scale.scene import Scene
from streaming_app.common.metrics_record import BatchMetrics, read_metrics
from tests.integration.cluster_helpers import SubmittedApp

CORES = 2  # the machine's: what every figure of "busy" is against


def cpu_figures(samples: Samples, start: float, end: float, words: int) -> dict[str, Any]:
    """CPU seconds per process class in the window, per million words, and how busy the
    machine was (every process on it, against CORES x wall seconds)."""
    classes = by_class(samples, window_cpu(samples, start, end))
    wall = end - start
    busy = machine_busy_s(samples, start, end)
    ours = sum(classes.values())
    return {
        "window_s": round(wall, 2),
        "window_words": words,
        "cpu_s": {k: round(v, 2) for k, v in classes.items()},
        "cpu_us_per_word": {k: round(v * 1e6 / max(words, 1), 3) for k, v in classes.items()},
        "cpu_s_total": round(ours, 2),
        "machine_busy_s": round(busy, 2),
        "machine_busy_share": round(busy / (CORES * max(wall, 1e-9)), 3),
        "hosts_share_of_busy": round(ours / max(busy, 1e-9), 3),
    }


def submit_args(scene: Scene, workers: int, events: Path) -> list[str]:
    """spark-submit's options: client mode from the driver's host, `workers` executors of
    one core (each on a worker of its own), the event log in `events`."""
    return [
        "--master", scene.cluster.master_url,
        "--conf", f"spark.driver.host={scene.hosts['driver'].address}",
        "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.cores.max={workers}",
        # Wait for every executor before the context is made: the state's partitions
        # follow the cores registered then (sc.defaultParallelism).
        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1",
        "--conf", "spark.eventLog.enabled=true",
        "--conf", f"spark.eventLog.dir=file://{events}",
        # One plain JSON-lines file (Spark 4 rolls it into a folder of zstd files).
        "--conf", "spark.eventLog.compress=false",
        "--conf", "spark.eventLog.rolling.enabled=false",
        "--executor-memory", "512m",  # fits a worker's 1 GiB
    ]  # fmt: skip


def sink_args(scene: Scene, run_dir: Path, sink: str) -> list[str]:
    """The exact configuration's sinks after kafka_args' console: files, or postgres into
    a new table of the server on its own host (with the default state checkpoints)."""
    if sink == "files":
        return exact_args(run_dir)
    config = run_dir / "postgres.ini"
    config.write_text(f"[postgres]\npostgres_dsn = {scene.pg.dsn()}\n", encoding="utf-8")
    table = f"scale_{uuid.uuid4().hex[:10]}"
    return ["--sink", "postgres", "--postgres-table", table, "--config", str(config),
            "--checkpoint-interval", str(10 * BATCH_S)]  # fmt: skip


def app_run(
    scene: Scene, name: str, topic: str, lines: int, batch_lines: int, partitions: int,
    workers: int, sink: str, env: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The app on `workers` workers reading the topic's `lines` lines, `env` added to its
    driver's environment; its figures."""
    run_dir = scene.workdir / name
    events = run_dir / "events"
    events.mkdir(parents=True)
    metrics = run_dir / "metrics.jsonl"
    rate = max(1, batch_lines // (partitions * BATCH_S))
    run_args = [
        *kafka_args(run_dir, scene.bootstrap, topic, "--max-rate-per-partition", str(rate)),
        *sink_args(scene, run_dir, sink), "--allow-local-checkpoint",
        "--metrics-file", str(metrics), "--no-progress",
    ]  # fmt: skip
    sampler = CpuSampler(scene.namespaces())
    app = SubmittedApp(
        submit_args(scene, workers, events), run_args, run_dir, "submit",
        on=scene.hosts["driver"], env=env,
    )  # fmt: skip
    try:
        poll_until(
            lambda: read_metrics(metrics)[0] if metrics.exists() else [],
            lambda found: sum(b.records or 0 for b in found) >= lines,
            app.proc, app.log_path, 240 + lines / 20_000, f"{name} reading {lines} lines",
        )  # fmt: skip
    finally:
        samples = sampler.stop()
        if app.proc.poll() is None:
            # A graceful stop closes the event log; one that hangs is killed (the figures
            # come from the steady batches, long written by then).
            with contextlib.suppress(AssertionError):
                app.terminate(timeout=180)
        app.stop_if_running()
    wait_for_no_app(scene)
    found = read_metrics(metrics)[0]
    busy = [b for b in found if b.records and b.processing_ms]
    steady = steady_batches(busy, [b.records or 0 for b in busy], 0)
    words = sum((b.records or 0) * WORDS_PER_LINE for b in steady)
    start, end = processing_window(steady)
    return {
        "workers": workers,
        **batch_figures([(b.records or 0, (b.processing_ms or 0) / 1000) for b in steady]),
        "scheduling_delay_s": [round((b.scheduling_delay_ms or 0) / 1000, 1) for b in steady],
        **cpu_figures(samples, start, end, words),
        # Each steady batch's CPU by class: whether a class's share falls as the run goes
        # on (a young JVM compiling its code) or stays (work a batch or a word).
        "cpu_s_by_batch": [
            {
                k: round(v, 2)
                for k, v in by_class(samples, window_cpu(samples, *processing_window([b]))).items()
            }
            for b in steady
        ],
        "timeline": summary(
            batches(read_events(event_lines(events))), [b.batch_time_ms for b in steady]
        ),
    }


def processing_window(steady: list[BatchMetrics]) -> tuple[float, float]:
    """From the first steady batch's start of processing to the last one's end (epoch s)."""
    first = steady[0]
    return (first.completed_ms - (first.processing_ms or 0)) / 1000, steady[-1].completed_ms / 1000


def event_lines(events: Path) -> list[str]:
    """The lines of the event log Spark wrote into `events` (finished or in progress; a
    rolled log's files in order); a compressed one is refused, not misread."""
    logs = sorted(p for p in events.rglob("*") if p.is_file() and not p.name.startswith("."))
    logs = [p for p in logs if not p.name.startswith("appstatus")]
    if any(p.suffix in (".zstd", ".lz4", ".snappy", ".lzf") for p in logs):
        raise RuntimeError(f"a compressed event log in {events}: spark.eventLog.compress=false")
    return [line for p in logs for line in p.read_text("utf-8", errors="replace").splitlines()]


def wait_for_no_app(scene: Scene, timeout: float = 120) -> None:
    """Until the master has no active application: the next run gets every core."""
    deadline = time.monotonic() + timeout
    while scene.cluster.master_json()["activeapps"]:
        if time.monotonic() > deadline:
            raise RuntimeError("an application is still active on the master")
        time.sleep(0.5)


def plain_run(
    scene: Scene, topic: str, lines: int, partitions: int, processes: int
) -> dict[str, Any]:
    """plain Python's count of the whole topic in `processes` processes; its figures."""
    sampler = CpuSampler(scene.namespaces())
    try:
        found = scene.plain(topic, partitions, lines, processes)
    finally:
        samples = sampler.stop()
    start = min(f["start"] for f in found)
    end = max(f["end"] for f in found)
    words = sum(f["words"] for f in found)
    return {
        "processes": processes,
        "seconds": round(end - start, 3),
        "words_per_s": round(words / (end - start)),
        "mean_words_per_s": round(words / (end - start)),
        "process_cpu_s": [round(f["cpu_s"], 2) for f in found],
        **cpu_figures(samples, start, end, words),
    }
