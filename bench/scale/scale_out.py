"""Scale-out on a real standalone cluster: the app on two one-core workers against one, and
plain Python in two processes against one on the same cores.

    python bench/run.py scale-out [--smoke] [--runs 3] [--lines 1320000]
                                  [--batch-lines 120000] [--plain-lines 600000]
                                  [--partitions 2]
                                  [--sinks files,postgres] [--workdir DIR]
                                  [--env-side LABEL:VAR=VALUE[,VAR=VALUE...]]
                                  [--worker-cpu SHARE]

Six hosts of their own (network namespaces; bench/scale/scene.py): the master, two workers
of one core each, the driver (scripts/submit.sh, client mode), the broker (tansu) and
PostgreSQL. One topic holds a backlog of `--lines` lines; for each sink (files, then
postgres) the runs go round after round, each round starting one run later: the app on 1
worker and on 2 (`spark.cores.max`), and plain Python (one kafka-python consumer and
Counter a process) in 1 process and in 2, one on each worker host. For each: words/s of
processing, every process's CPU seconds over the steady window (from /proc), and the
app's batch timeline from Spark's event log (bench/scale/runs.py). The gain of 2 over 1
for the app and for plain Python, the app's gain against plain Python's (target: within
0.85 of it), and a projection for more cores from the CPU a word of each process class
(bench/scale/report.py). --env-side adds the app's two runs again, with that environment
added to the driver's (scripts/submit.sh's: `STREAMING_APP_JVM_C1=0`, say), in the same
rounds: a change measured side by side, each side's gain against the same plain Python
runs. Needs root (namespaces) and PostgreSQL's server binaries.
"""

from __future__ import annotations

import argparse
import re
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness.env_side import env_side
from bench.harness.results import machine, make_workdir, write_json
from bench.scale.report import report, side_key
from bench.scale.runs import app_run, plain_run
from bench.scale.scene import Scene, scene

SINKS = ("files", "postgres")
# 2 warm-up batches, 8 steady ones, the last left out: 11 batches of 120,000 lines. One
# one-core worker takes about 2.7 s a batch of that size (more than the 2 s interval:
# a backlog it cannot keep up with); two should take less than the interval.
BATCH_LINES = 120_000
LINES = 11 * BATCH_LINES
# Plain Python reads the topic's first PLAIN_LINES lines (each of its processes an equal
# share of them): tens of seconds in one process, enough for a steady rate.
PLAIN_LINES = 600_000
SMOKE = {"lines": 8 * 2_000, "batch_lines": 2_000, "runs": 1, "plain_lines": 8 * 2_000}


def run_one(
    hosts: Scene, kind: str, n: int, sink: str, topic: str, lines: int, batch_lines: int,
    partitions: int, plain_lines: int, env: dict[str, str] | None, name: str,
) -> dict[str, Any]:  # fmt: skip
    """One run: the app on `n` workers with `sink` (`env` added to its driver's
    environment), or plain Python in `n` processes."""
    if kind == "app":
        return app_run(hosts, name, topic, lines, batch_lines, partitions, n, sink, env)
    return plain_run(hosts, topic, plain_lines, partitions, n)


def measure(
    workdir: Path, sinks: list[str], runs: int, lines: int, batch_lines: int, partitions: int,
    plain_lines: int, side: tuple[str, dict[str, str]] | None = None,
    worker_cpu: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every sink's four runs (app on 1 and 2 workers, plain in 1 and 2 processes), and the
    app's two again with `side`'s environment if given, `runs` rounds each, rotated; every
    run's figures, by sink and name."""
    found: dict[str, Any] = {}
    with scene(workdir, worker_cpu) as hosts:
        topic = f"scale-{uuid.uuid4().hex[:8]}"
        started = time.monotonic()
        hosts.load_topic(topic, lines, partitions)
        found["load_s"] = round(time.monotonic() - started, 1)
        for sink in sinks:
            plan = {
                f"{kind}-{n}": partial(run_one, hosts, kind, n, sink, topic, lines,
                                       batch_lines, partitions, plain_lines, None)
                for kind in ("app", "plain") for n in (1, 2)
            }  # fmt: skip
            if side is not None:
                for n in (1, 2):
                    plan[side_key(f"app-{n}", side[0])] = partial(
                        run_one, hosts, "app", n, sink, topic, lines, batch_lines,
                        partitions, plain_lines, side[1],
                    )  # fmt: skip
            runs_of: dict[str, list[dict[str, Any]]] = {key: [] for key in plan}
            keys = list(plan)
            for number in range(runs):
                shift = number % len(keys)
                for key in keys[shift:] + keys[:shift]:
                    # A directory name Spark takes as a path (no spaces, quotes, `@`).
                    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{sink}-{key}-r{number + 1}")
                    runs_of[key].append(plan[key](name))
            found[sink] = runs_of
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness")
    parser.add_argument("--runs", type=int, help="rounds of the four runs, per sink [3]")
    parser.add_argument("--lines", type=int, help=f"lines of the backlog [{LINES}]")
    parser.add_argument("--batch-lines", type=int, help=f"lines a batch [{BATCH_LINES}]")
    parser.add_argument("--plain-lines", type=int, help=f"lines plain Python reads [{PLAIN_LINES}]")
    parser.add_argument("--partitions", type=int, default=2, help="Kafka partitions [2]")
    parser.add_argument("--sinks", default=",".join(SINKS), help="[files,postgres]")
    parser.add_argument("--workdir", type=Path, help="keep logs, event logs and results here")
    parser.add_argument(
        "--env-side", type=env_side, metavar="LABEL:VAR=VALUE[,VAR=VALUE...]",
        help="the app's runs again with this added to the driver's environment",
    )  # fmt: skip
    parser.add_argument(
        "--worker-cpu", type=float, metavar="SHARE",
        help="hold each worker host to this share of a core (a cgroup CPU quota): every "
             "worker a core of its own, scaled to fit the machine beside the driver",
    )  # fmt: skip
    options = parser.parse_args()
    if options.worker_cpu is not None and not 0 < options.worker_cpu <= 1:
        parser.error(f"--worker-cpu must be above 0 and at most 1, not {options.worker_cpu}")
    sizes = SMOKE if options.smoke else {
        "lines": LINES, "batch_lines": BATCH_LINES, "runs": 3, "plain_lines": PLAIN_LINES,
    }  # fmt: skip
    runs = options.runs or sizes["runs"]
    lines = options.lines or sizes["lines"]
    batch_lines = options.batch_lines or sizes["batch_lines"]
    plain_lines = min(options.plain_lines or sizes["plain_lines"], lines)
    sinks = [s for s in options.sinks.split(",") if s]
    unknown = set(sinks) - set(SINKS)
    if unknown:
        parser.error(f"unknown sink(s) {', '.join(sorted(unknown))}; known: {', '.join(SINKS)}")
    workdir = make_workdir(options.workdir, "bench-scale-")
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "runs": runs, "lines": lines, "batch_lines": batch_lines,
        "partitions": options.partitions, "sinks": sinks, "plain_lines": plain_lines,
        "env_side": list(options.env_side) if options.env_side else None,
        "worker_cpu": options.worker_cpu,
        **measure(workdir, sinks, runs, lines, batch_lines, options.partitions, plain_lines,
                  options.env_side, options.worker_cpu),
    }  # fmt: skip
    write_json(workdir / "scale_out.json", results)
    print("\n".join(report(results)))
    print(f"\n(logs, event logs and scale_out.json in {workdir})")
