"""The exact configuration's first minutes: where each window's CPU goes, JVM thread by thread.

    python bench/run.py warmup [--smoke] [--batch-lines 60000] [--seconds 150]
                               [--window 10] [--workdir DIR]

The app in the exact configuration (bench/harness/app.exact_args: Kafka, 2 s batches, the
files and console sinks, checkpoints and snapshots at their defaults, local[2]) reads a
preloaded topic in batches of `--batch-lines` for `--seconds` of batches: a steady load it
keeps up with, so that every window of the run did the same work. Every 2 s a sampler
reads /proc: the CPU of each of the run's processes (the driver, the Python workers) and
of each thread of its JVM, grouped by the thread's name with the numbers taken out
(`Executor task launch worker for task 12.0 ...` is one group, whatever task it runs:
Spark renames its pool's threads per task). Per `--window` seconds from the app's start:
each group's CPU seconds, the median batch's processing time and the CPU per 1000 lines.
The windows a run's first minute holds against those after it say which process, and
which of the JVM's threads (the JIT's compiler threads, the task threads, the stream's
scheduling), spends what the warm runs do not (docs/benchmarks-one-process.md).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S, AppRun, exact_args, kafka_args
from bench.harness.corpus import PARTITIONS, broker, load_topic
from bench.harness.proc_cpu import TICK, Samples, by_class, stat_ticks, window_cpu
from bench.harness.processes import role, session_processes
from bench.harness.results import machine, make_workdir, write_json

SAMPLE_S = 2.0
# bench/harness/processes.role's names, as the report says them.
ROLES = {"driver": "driver (Python)", "workers": "Python workers", "other": "other"}
SMOKE = {"batch_lines": 2_000, "seconds": 20, "window": 10}
# Groups shown apart in the report, the largest over the run; the rest are summed.
SHOWN = 10


def thread_group(comm: str) -> str:
    """A JVM thread's group: its name (/proc/<pid>/task/<tid>/comm, 15 characters) with
    each run of digits as `#`; Spark's executor task threads are one group whatever their
    name says (`Executor task launch worker-0`, `Executor task launch worker for task 3.0
    in stage ...`, cut at 15 characters)."""
    if comm.startswith("Executor task"):
        return "JVM: task threads"
    return "JVM: " + re.sub(r"\d+", "#", comm.strip())


def sample(samples: Samples, sid: int, at: float) -> None:
    """One sample of every process of the app's session (AppRun starts it in its own),
    the JVM's threads one by one."""
    for pid, command in session_processes(sid).items():
        kind = role(command)
        with contextlib.suppress(OSError, IndexError, ValueError):
            if kind != "jvm":
                stat = Path(f"/proc/{pid}/stat").read_text()
                samples.add(pid, ROLES.get(kind, kind), at, stat_ticks(stat) / TICK)
                continue
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    group = thread_group((task / "comm").read_text())
                    tid = int(task.name)
                    samples.add(tid, group, at, stat_ticks((task / "stat").read_text()) / TICK)


def windows(
    samples: Samples, batches: list[tuple[float, int, float]], start: float, window: float
) -> list[dict[str, Any]]:
    """Per `window` seconds from `start`: each group's CPU seconds (a thread or process
    counted in the group it was first seen in), the batches completed in it (their
    completion time, lines, processing seconds): how many, their lines, the median
    processing time, and the CPU per 1000 lines."""
    last = max((t for series in samples.series.values() for t, _ in series), default=start)
    rows = []
    begin = start
    while begin < last:
        end = begin + window
        groups = by_class(samples, window_cpu(samples, begin, end))
        done = [b for b in batches if begin <= b[0] < end]
        lines = sum(b[1] for b in done)
        total = sum(groups.values())
        rows.append({
            "from_s": round(begin - start), "to_s": round(end - start), "batches": len(done),
            "lines": lines,
            "median_batch_s": round(statistics.median(b[2] for b in done), 3) if done else None,
            "cpu_s": {g: round(s, 2) for g, s in groups.items()}, "total_cpu_s": round(total, 2),
            "cpu_ms_per_kline": round(1e6 * total / lines, 2) if lines else None,
        })  # fmt: skip
        begin = end
    return rows


def shown_groups(rows: list[dict[str, Any]], shown: int = SHOWN) -> list[str]:
    """The `shown` groups that spent the most over the run, largest first."""
    spent: dict[str, float] = {}
    for row in rows:
        for group, seconds in row["cpu_s"].items():
            spent[group] = spent.get(group, 0.0) + seconds
    return sorted(spent, key=lambda g: (-spent[g], g))[:shown]


def report(found: dict[str, Any]) -> list[str]:
    """The markdown table: a row per window, a column per group shown, the rest summed."""
    rows = found["windows"]
    groups = shown_groups(rows)
    head = ["window", "batches", "median batch", *groups, "the rest", "all", "ms / 1000 lines"]
    lines = [
        f"**The exact configuration's first minutes**, {found['batch_lines']:,}-line batches "
        f"every {BATCH_S} s for {found['seconds']} s, CPU seconds a {found['window']} s window "
        f"(/proc, every {SAMPLE_S:g} s; {found['machine']['cpu']}):",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in rows:
        rest = row["total_cpu_s"] - sum(row["cpu_s"].get(g, 0.0) for g in groups)
        median = row["median_batch_s"]
        per_kline = row["cpu_ms_per_kline"]
        cells = [
            f"{row['from_s']}-{row['to_s']} s", str(row["batches"]),
            "" if median is None else f"{median:.2f} s",
            *(f"{row['cpu_s'].get(g, 0.0):.2f}" for g in groups), f"{rest:.2f}",
            f"{row['total_cpu_s']:.2f}", "" if per_kline is None else f"{per_kline:.1f}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def warmup(workdir: Path, batch_lines: int, seconds: int, window: float) -> dict[str, Any]:
    """One run of the exact configuration, sampled; its windows."""
    lines = batch_lines * seconds // BATCH_S
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))
    samples = Samples()
    with broker(workdir) as bootstrap:
        topic = load_topic(bootstrap, lines)
        args = kafka_args(workdir / "app", bootstrap, topic, "--max-rate-per-partition", str(rate))
        app = AppRun.start(workdir, "warmup", [*args, *exact_args(workdir / "app")])
        stop = threading.Event()

        def sampler() -> None:
            while not stop.is_set():
                sample(samples, app.proc.pid, time.time())
                stop.wait(SAMPLE_S)

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        try:
            app.wait_for(lambda b: sum(x.records or 0 for x in b) >= lines, 300 + 2 * seconds)
        finally:
            stop.set()
            thread.join()
            app.stop()
    batches = [
        (b.completed_ms / 1000, b.records or 0, (b.processing_ms or 0) / 1000)
        for b in app.batches()
        if b.records
    ]
    return {
        "batch_lines": batch_lines, "seconds": seconds, "window": window, "machine": machine(),
        "windows": windows(samples, batches, app.started, window),
    }  # fmt: skip


def main() -> None:
    """Run it and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness")
    parser.add_argument("--batch-lines", type=int, default=60_000, help="lines a batch [60000]")
    parser.add_argument("--seconds", type=int, default=150, help="seconds of batches [150]")
    parser.add_argument("--window", type=float, default=10, help="seconds a window [10]")
    parser.add_argument("--workdir", type=Path, help="keep the logs and results here")
    options = parser.parse_args()
    sizes = SMOKE if options.smoke else vars(options)
    workdir = make_workdir(options.workdir, "streaming-app-warmup-")
    found = warmup(workdir, sizes["batch_lines"], sizes["seconds"], sizes["window"])
    write_json(workdir / "results.json", found)
    print("\n".join(report(found)))
    print(f"\n(logs, metrics and results.json in {workdir})", file=sys.stderr)
