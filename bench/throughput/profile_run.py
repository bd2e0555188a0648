"""Where the time of a batch goes: the throughput run under py-spy, driver and workers.

    python bench/run.py profile [--seconds 20] [--rate 100] [--lines N] [--batch-lines N]
        [--workdir DIR] [-- RUN ARGS]

Needs py-spy (`pip install py-spy`, or the `bench` extra) and ptrace rights over its own
children (the default for root, or kernel.yama.ptrace_scope=0). It loads a topic as the
throughput benchmark does, starts the app (extra RUN ARGS go to `streaming-app run`),
waits for three batches, then samples every Python process of the app (the driver, the
worker daemon and its workers) and prints the share of samples per part of the work.
py-spy slows the processes it samples: the shares mean something, the batch times not.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
from pathlib import Path

from bench.harness.app import AppRun, kafka_args
from bench.harness.corpus import PARTITIONS, broker, load_topic
from bench.harness.results import make_workdir

# Parts of the work by the frames that show them, tried from the innermost frame out.
PARTS = (
    ("pickling (cloudpickle dumps/loads of data and functions)",
     ("CloudPickleSerializer.", "Pickler.dump", "cloudpickle")),
    ("Kafka fetch and decode (kafka-python)", ("read_range", "kafka/")),
    ("tokenize and count per partition", ("tokenize", "count_words", "Counter.update")),
    ("state: shuffle write, merge, update (Python side)",
     ("ExternalMerger", "groupByKey", "python_cogroup", "merge_bucket", "partitionBy",
      "update_count", "updateStateByKey", "by_bucket", "combineByKey", "merge_parts",
      "merge_states")),
    ("console sink: top N of the totals", ("takeOrdered", "nsmallest", "_by_count")),
    ("gc.collect() after each task (daemon)", ("daemon.py:275",)),
    ("batching and socket I/O to the JVM", ("dump_stream", "load_stream", "read_int",
                                            "write_int", "socket.py")),
)  # fmt: skip


def part_of(frames: list[str]) -> str:
    """The part of the work a worker sample belongs to."""
    for frame in reversed(frames):
        for name, marks in PARTS:
            if any(mark in frame for mark in marks):
                return name
    return "other (worker)"


def summarize(raw: Path) -> dict[str, float]:
    """Share of samples per part; driver samples are one part (py4j callbacks, planning)."""
    shares: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        process = [f for f in frames if f.startswith("process ")][-1]
        if "streaming_app run" in process:
            shares["driver (py4j callbacks, batch planning, sinks' driver side)"] += int(count)
        else:
            shares[part_of([f for f in frames if not f.startswith("process ")])] += int(count)
    total = sum(shares.values()) or 1
    return {name: round(100 * n / total, 1) for name, n in shares.most_common()}


def main() -> None:
    """Profile a throughput run and print the shares."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rate", type=int, default=100, help="samples per second")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--lines", type=int, default=200_000, help="lines in the topic")
    parser.add_argument("--batch-lines", type=int, default=20_000, help="lines per batch")
    parser.add_argument("run_args", nargs="*", help="extra `streaming-app run` arguments")
    options = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("error: py-spy is not installed (pip install py-spy)")
    workdir = make_workdir(options.workdir, "streaming-app-profile-")
    with broker(workdir) as bootstrap:
        topic = load_topic(bootstrap, options.lines)
        rate = str(options.batch_lines // (PARTITIONS * 2))
        args = kafka_args(workdir, bootstrap, topic, "--max-rate-per-partition", rate)
        app = AppRun.start(workdir, "profile", [*args, "--checkpoint-interval", "20",
                                                *options.run_args])  # fmt: skip
        try:
            app.wait_for(lambda b: len([x for x in b if x.records]) >= 3, 180)
            raw = workdir / "profile.txt"
            subprocess.run(
                [spy, "record", "--pid", str(app.proc.pid), "--subprocesses", "--format", "raw",
                 "--duration", str(options.seconds), "--rate", str(options.rate),
                 "--nonblocking", "--output", str(raw)],
                check=True, capture_output=True,
            )  # fmt: skip
        finally:
            app.stop()
    for name, share in summarize(raw).items():
        print(f"{share:5.1f}%  {name}")
    print(f"\n(raw samples, for flamegraph.pl or speedscope: {raw})", file=sys.stderr)
