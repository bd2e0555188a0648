"""What runs on a host for the scale-out benchmark: loading the topic, and plain Python's count.

These functions run in a process started on a namespace host (`python -c`, with this
checkout on sys.path), not in the benchmark's process: the root namespace has no route to
the hosts. `count_child` is the plain baseline (bench/harness/corpus.py's count_partitions:
one kafka-python consumer and Counter) on some of the topic's partitions; every process
of a run waits for the same wall-clock moment before it starts, so that their imports and
start-up count in none, and prints what it did as one JSON line.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from bench.harness.corpus import VOCABULARY, WORDS_PER_LINE, count_partitions

ROOT = Path(__file__).resolve().parents[2]


def load(bootstrap: str, topic: str, lines: int, partitions: int) -> None:
    """The corpus (load_topic's: 10-word lines, Zipf over 100k words, seed 1) on a new topic
    of `partitions` partitions, round-robin, each partition's last line sent alone."""
    from streaming_app.sources.kafka.client import KafkaConnection
    from streaming_app.tools.produce import generated_lines, produce

    corpus = generated_lines(WORDS_PER_LINE, VOCABULARY, 1)
    produce(KafkaConnection(bootstrap), topic, corpus, lines, 0, partitions)


def count_child(bootstrap: str, topic: str, partitions: list[int], lines: int, at: float) -> None:
    """Count `lines` lines of `partitions` from their beginning, starting at wall-clock
    time `at`; print {start, end, words, cpu_s} (cpu_s: this process's, from getrusage)."""
    time.sleep(max(0.0, at - time.time()))
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.time()
    counts = count_partitions(bootstrap, topic, partitions, lines)
    end = time.time()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(json.dumps({"start": start, "end": end, "words": sum(counts.values()), "cpu_s": cpu}))


def command(call: str) -> list[str]:
    """A Python command line that runs `call` (an expression on this module) on a host."""
    return [
        sys.executable, "-c",
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import bench.scale.plain as p; {call}",
    ]  # fmt: skip
