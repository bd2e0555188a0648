"""A long run at a steady input: the memory of the driver, the JVM and the Python workers.

    python bench/run.py memory-run [--minutes 30] [--every 10] [--keys 1000000]
                               [--batch-lines 10000] [--update-docs]

Not a part of bench/run.py (it takes as long as it is told). A topic holds every key once,
then enough Zipf lines over the same keys for the whole run (bench/state/state_size.py's
`key_topic`; loading 9,000,000 lines for the defaults takes several minutes, and the
in-memory broker keeps them all); the app reads it in the exact configuration (files +
console sinks, snapshots on) capped at `--batch-lines` lines a batch, so that the state
holds a fixed set of keys and the input is the same every batch. Every `--every` seconds
the resident memory of each kind of process is sampled; after the warm-up (the keys
loaded, and `--warmup-minutes`) the report gives its first, last and peak value and the
least-squares slope, over all those samples and over their second half. Every `--gc-every`
seconds the JVM is also made to run a full collection (`jcmd <pid> GC.run`), after which
its used heap (`GC.heap_info`) is what it still holds: resident memory alone cannot tell
a heap growing toward its maximum from one that leaks. Spark's streaming UI keeps the
last 1,000 batches (`spark.streaming.ui.retainedBatches`), about 33 minutes of 2 s
batches, so the heap may grow by those records for that long.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S, EXACT_CHECKPOINT_BATCHES, AppRun, exact_args, kafka_args
from bench.harness.corpus import PARTITIONS, broker
from bench.harness.docs import block, update_docs
from bench.harness.memory import FIELDS, RssTimeline, course, heap_after_full_gc, trend
from bench.harness.processes import role, session_processes
from bench.harness.results import machine, make_workdir, median, write_json
from bench.state.state_size import key_topic
from streaming_app.common.metrics_record import BatchMetrics

LABELS = {
    "driver_kb": "driver (Python, resident)",
    "jvm_kb": "JVM (resident)",
    "workers_kb": "Python workers together (Pss)",
    "heap_kb": "JVM heap after a full GC (used)",
}


def warm_until(batches: list[BatchMetrics], loading: int, started: float, warmup_s: float) -> float:
    """When the warm-up ends (time.time()): the keys loaded (the batch that read the last
    of them completed) and `warmup_s` after the start, whichever is later."""
    read = 0
    for batch in batches:
        read += batch.records or 0
        if read >= loading:
            return max(batch.completed_ms / 1000, started + warmup_s)
    return float("inf")


def jvm_pid(sid: int) -> int | None:
    """The app's JVM among the processes of its session."""
    return next((pid for pid, cmd in session_processes(sid).items() if role(cmd) == "jvm"), None)


def memory_run(
    workdir: Path,
    minutes: float,
    every: float,
    keys: int,
    batch_lines: int,
    warmup_s: float,
    gc_every: float = 120.0,
) -> dict[str, Any]:
    """Run the app for `minutes` at `batch_lines` lines a batch; its memory over time."""
    batches_wanted = int(minutes * 60 / BATCH_S) + 30  # a margin: the input must not run out
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))
    with broker(workdir) as bootstrap:
        print(f"loading {keys:,} keys and {batches_wanted * batch_lines:,} lines", file=sys.stderr)
        topic, loading = key_topic(bootstrap, keys, batches_wanted * batch_lines)
        name = "memory-run"
        args = kafka_args(workdir / name, bootstrap, topic, "--max-rate-per-partition", str(rate))
        app = AppRun.start(workdir, name, [*args, *exact_args(workdir / name)])
        timeline = RssTimeline(app.proc.pid, every=every)
        heap: list[tuple[float, int]] = []
        try:
            deadline = app.started + minutes * 60
            while time.time() < deadline and app.proc.poll() is None:
                time.sleep(min(gc_every, max(0.0, deadline - time.time())))
                pid = jvm_pid(app.proc.pid)
                used = heap_after_full_gc(pid) if pid else None
                if used is not None:
                    heap.append((time.time(), used))
                print(f"{(time.time() - app.started) / 60:.1f} min: "
                      f"{len(app.batches())} batches, heap after a full GC "
                      f"{'?' if used is None else used // 1024} MiB", file=sys.stderr)  # fmt: skip
            if app.proc.poll() is not None:
                raise SystemExit(f"the app ended early; see {app.log}")
        finally:
            ended = time.time()
            timeline.stop()
            app.stop()
    batches = app.batches()
    since = warm_until(batches, loading, app.started, warmup_s)
    # Not the batches of the graceful stop, which read nothing.
    after = [b for b in batches if since <= b.completed_ms / 1000 < ended]
    counts = [s.workers for s in timeline.samples if s.at >= since]
    return {
        "minutes": minutes,
        "every_s": every,
        "keys": keys,
        "batch_lines": PARTITIONS * rate * BATCH_S,
        "checkpoint_batches": EXACT_CHECKPOINT_BATCHES,
        "warm_after_s": round(since - app.started, 1),
        "batches": len(after),
        "records": sum(b.records or 0 for b in after),
        "processing_s": round(median([(b.processing_ms or 0) / 1000 for b in after]), 3),
        "max_processing_s": round(
            max(((b.processing_ms or 0) / 1000 for b in after), default=0), 3
        ),
        "last_scheduling_delay_s": round((after[-1].scheduling_delay_ms or 0) / 1000, 2)
        if after
        else None,
        "worker_processes": [min(counts), max(counts)] if counts else None,
        "trend": {
            **{field: trend(timeline.samples, field, since) for field in FIELDS},
            "heap_kb": course(heap, since),
        },
        "gc_every_s": gc_every,
        "heap_samples": heap,
        "samples": timeline.rows(),
    }


def _mib(value: Any, unit: str = " MiB") -> str:
    return "—" if value is None else f"{value:+}{unit}" if unit.endswith("/h") else f"{value}{unit}"


def memory_run_report(m: dict[str, Any]) -> list[str]:
    """The long run's table for docs/benchmarks.md."""
    lines = [
        f"**Memory over a long run** (`python bench/run.py memory-run --minutes {m['minutes']:g}`: "
        f"Kafka source, `local[2]`, 2 s batches, `--sink files --sink console`, a state "
        f"checkpoint and a snapshot every {m['checkpoint_batches']} batches; {m['keys']:,} keys "
        f"loaded, then {m['batch_lines']:,} Zipf lines over them every batch, "
        f"{m['batch_lines'] // BATCH_S:,} lines/s; resident memory sampled every "
        f"{m['every_s']:g} s, the JVM's heap after a full GC (`jcmd GC.run`) every "
        f"{m.get('gc_every_s', 120):g} s; figures from the end of the warm-up, "
        f"{m['warm_after_s']:g} s after the start, to the end of the run; slope: least "
        "squares, per hour):",
        "",
        "| | start | end | peak | slope | slope, second half |",
        "|---|---|---|---|---|---|",
    ]
    for field, label in LABELS.items():
        t = m["trend"].get(field)
        if t is None:
            continue
        lines.append(
            f"| {label} | {_mib(t['start_mib'])} | {_mib(t['end_mib'])} | "
            f"{_mib(t['peak_mib'])} | {_mib(t['slope_mib_h'], ' MiB/h')} | "
            f"{_mib(t['late_slope_mib_h'], ' MiB/h')} |"
        )
    workers = m["worker_processes"]
    lines += [
        "",
        f"Over those {m['batches']:,} batches ({m['records']:,} lines): processing "
        f"{m['processing_s']} s a batch (median), {m['max_processing_s']} s at the slowest; "
        f"scheduling delay at the last batch {m['last_scheduling_delay_s']} s; Python worker "
        f"processes: {workers[0] if workers else '?'} to {workers[1] if workers else '?'}.",
    ]
    return lines


def main() -> None:
    """Run the app for a while and print its memory's course."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long [30]")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples [10]")
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys in the state [1000000]")
    parser.add_argument("--batch-lines", type=int, default=10_000, help="lines a batch [10000]")
    parser.add_argument(
        "--gc-every", type=float, default=120.0, help="seconds between full-GC heap samples [120]"
    )
    parser.add_argument("--warmup-minutes", type=float, default=2.0, help="left out [2]")
    parser.add_argument("--workdir", type=Path, help="keep logs, metrics and samples here")
    parser.add_argument("--update-docs", action="store_true", help="write docs/benchmarks.md")
    options = parser.parse_args()
    workdir = make_workdir(options.workdir, "streaming-app-memory-")
    found = memory_run(
        workdir, options.minutes, options.every, options.keys, options.batch_lines,
        options.warmup_minutes * 60, options.gc_every,
    )  # fmt: skip
    write_json(workdir / "memory_run.json", found)
    lines = memory_run_report(found)
    print("\n".join(lines))
    print(f"\n(logs, metrics and memory_run.json in {workdir})", file=sys.stderr)
    if options.update_docs:
        m = machine()
        stamp = (
            f"Measured {time.strftime('%Y-%m-%d')} on {m['cpu']}; Python {m['python']}, "
            f"PySpark {m['pyspark']}, {m['java']}; broker: {m['broker']}."
        )
        update_docs(blocks={"memory-run": block("memory-run", [stamp, "", *lines])})
