"""Before/after of the small changes, in one process: each old and new path side by side.

- counting the words of ASCII lines: per line check NFC, match, lower-case each word
  (0.2.0), or 1000 lines at a time lower-cased, separators turned to spaces, split;
- the last poll of a planned range: kafka-python decodes up to max_records records
  (5000 before) where the range needed one;
- gc.collect() in a worker that has imported what the tasks run, before and after
  gc.freeze() (what the preloaded worker daemon does once);
- kafka-python's CRC-32C of a 1 MiB record batch, pure Python and the `crc32c` package;

and, for "Where the time goes", what each line costs on the way from the broker to the
per-partition counts, in one process: the baseline, kafka-python's poll alone, the app's
reader, and the reader with the counting as 0.2.0 did it and as it is now.
"""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness.corpus import (
    PARTITIONS,
    VOCABULARY,
    WORDS_PER_LINE,
    baseline_seconds,
    load_topic,
)
from bench.harness.processes import cpu_seconds
from bench.harness.results import median
from streaming_app.jobs.text import DEFAULT_TOKEN_PATTERN, _compiled, count_words
from streaming_app.tools.produce import generated_lines


def side_by_side(
    before: Callable[[], Any], after: Callable[[], Any], repeats: int
) -> dict[str, float]:
    """Median seconds of each, the calls alternated so that drift hits both alike."""
    times: dict[str, list[float]] = {"before_s": [], "after_s": []}
    for _ in range(repeats):
        for key, action in (("before_s", before), ("after_s", after)):
            started = time.perf_counter()
            action()
            times[key].append(time.perf_counter() - started)
    return {key: median(values) for key, values in times.items()}


def old_tokenize(line: str) -> list[str]:
    """tokenize() as 0.2.0 had it, with the default pattern and lower-casing."""
    if not unicodedata.is_normalized("NFC", line):
        line = unicodedata.normalize("NFC", line)
    return [word.lower() for word in _compiled(DEFAULT_TOKEN_PATTERN).findall(line)]


def tokenizing(lines: int, repeats: int) -> dict[str, float]:
    """Seconds to count the words of `lines` generated ASCII lines, both ways."""
    corpus = list(itertools.islice(generated_lines(WORDS_PER_LINE, VOCABULARY, 1), lines))

    def before() -> None:
        counts: Counter[str] = Counter()
        for line in corpus:
            counts.update(old_tokenize(line))

    def after() -> None:
        dict(count_words(corpus))

    return side_by_side(before, after, repeats)


def last_poll(bootstrap: str, repeats: int) -> dict[str, float]:
    """Seconds of a poll that needs 1 record, asking for 5000 (before) or for 1."""
    from kafka import KafkaConsumer, TopicPartition

    topic = load_topic(bootstrap, 20_000)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])

    def poll(records: int) -> Callable[[], None]:
        def action() -> None:
            consumer.seek(tp, 100)
            got = consumer.poll(timeout_ms=5000, max_records=records)
            assert got, "no records"

        return action

    try:
        poll(1)()  # connected, metadata known
        return side_by_side(poll(5000), poll(1), repeats)
    finally:
        consumer.close()


GC_PROBE = """
import gc, time
import pyspark.worker, kafka.consumer, kafka.record.default_records
import streaming_app.jobs.counting, streaming_app.jobs.keyed, streaming_app.jobs.text
import streaming_app.sources.kafka.reader
def timed():
    times = []
    for _ in range(7):
        started = time.perf_counter(); gc.collect(); times.append(time.perf_counter() - started)
    return sorted(times)[3]
before = timed(); gc.freeze(); after = timed()
print(before, after)
"""


def collecting() -> dict[str, float]:
    """Seconds of gc.collect() in a fresh process with a worker's imports, unfrozen/frozen."""
    out = subprocess.run([sys.executable, "-c", GC_PROBE], capture_output=True, text=True,
                         check=True)  # fmt: skip
    before, after = map(float, out.stdout.split())
    return {"before_s": before, "after_s": after}


def crc(repeats: int) -> dict[str, float]:
    """Seconds for kafka-python's CRC-32C of 1 MiB: pure Python, and the C package."""
    from kafka.record import _crc32c
    from kafka.record.util import calc_crc32c

    data = memoryview(bytes(range(256)) * 4096)
    return side_by_side(lambda: _crc32c.crc(data), lambda: calc_crc32c(data), repeats)


def broker_cpu_s(bootstrap: str) -> Callable[[], float]:
    """CPU seconds used so far by the local broker serving `bootstrap` (NaN if not local)."""
    port = bootstrap.rsplit(":", 1)[-1]
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if proc.name.isdigit() and "broker" in command and f":{port}" in command:
            return partial(cpu_seconds, proc / "stat")
    return lambda: float("nan")


def per_line(bootstrap: str, lines: int, repeats: int) -> dict[str, float]:
    """Microseconds per line of each step's whole path, in this one process, interleaved."""
    from kafka import KafkaConsumer, TopicPartition

    from streaming_app.sources.kafka.client import KafkaConnection
    from streaming_app.sources.kafka.offsets import OffsetRange
    from streaming_app.sources.kafka.reader import read_range

    topic = load_topic(bootstrap, lines)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ends = consumer.end_offsets(partitions)
    consumer.close()
    ranges = [OffsetRange(topic, tp.partition, 0, ends[tp]) for tp in partitions]
    connection = KafkaConnection(bootstrap)

    def read() -> Iterator[str]:
        for offset_range in ranges:
            yield from read_range(offset_range, connection, 1 << 20, "fail")

    def poll_only() -> None:
        poller = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        poller.assign(partitions)
        poller.seek_to_beginning(*partitions)
        done = 0
        while done < lines:
            done += sum(map(len, poller.poll(timeout_ms=1000, max_records=10_000).values()))
        poller.close()

    def old_count() -> None:
        counts: Counter[str] = Counter()
        for line in read():
            counts.update(old_tokenize(line))

    steps: dict[str, Callable[[], Any]] = {
        "baseline": lambda: baseline_seconds(bootstrap, topic, lines),
        "poll": poll_only,
        "read": lambda: sum(1 for _ in read()),
        "read_count_old": old_count,
        "read_count": lambda: dict(count_words(read())),
    }
    cpu = broker_cpu_s(bootstrap)
    times: dict[str, list[float]] = {key: [] for key in steps}
    broker_s: list[float] = []
    for _ in range(repeats):
        for key, action in steps.items():
            cpu_before, started = cpu(), time.perf_counter()
            action()
            times[key].append(time.perf_counter() - started)
            if key == "poll":
                broker_s.append(cpu() - cpu_before)
    found = {key: median(values) * 1e6 / lines for key, values in times.items()}
    found["broker_cpu"] = median(broker_s) * 1e6 / lines
    return found


def per_line_report(us: dict[str, float], lines: int) -> list[str]:
    """The markdown table of the per-line costs."""
    rows = (
        ("baseline", "the baseline: kafka-python's poll, `split()`, `Counter.update`"),
        (
            "poll",
            "kafka-python's poll alone, one consumer over both partitions as the baseline "
            "reads (a `ConsumerRecord` per line)",
        ),
        (
            "read",
            "the app's reader (`read_range`, one consumer per partition as the executors "
            "read: the poll, range checks, UTF-8 decoding)",
        ),
        ("read_count_old", "the reader and the counting as 0.2.0 did it (a regex per line)"),
        ("read_count", "the reader and `count_words` now (1000 lines at a time)"),
        ("broker_cpu", "the broker's own CPU while serving the poll (another process)"),
    )
    return [
        "**Per line, in one process** (`bench/throughput/micro.py`: "
        f"{lines:,} lines of the throughput corpus read from the topic once per step, "
        "the steps interleaved, medians; "
        "what one core spends per line on the whole path):",
        "",
        "| path | µs per line |",
        "|---|---|",
        *[f"| {what} | {us[key]:.1f} |" for key, what in rows],
    ]


def micro(bootstrap: str, lines: int, repeats: int) -> dict[str, dict[str, float]]:
    """All four, each with its ratio before / after."""
    found = {
        "tokenize": tokenizing(lines, repeats),
        "last_poll": last_poll(bootstrap, repeats),
        "gc_collect": collecting(),
        "crc32c": crc(repeats),
    }
    gc.collect()
    for figures in found.values():
        figures["speedup"] = round(figures["before_s"] / max(figures["after_s"], 1e-9), 1)
    return found


def micro_report(m: dict[str, dict[str, float]], lines: int) -> list[str]:
    """The markdown table of the small changes."""

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.1f} ms" if seconds >= 0.001 else f"{seconds * 1e6:.0f} µs"

    def times(speedup: float) -> str:
        return f"{speedup:,.0f}×" if speedup >= 10 else f"{speedup}×"

    rows = (
        ("tokenize", f"count the words of {lines:,} ASCII lines of 10 words",
         "per line: NFC check, match, lower-case each word",
         "1000 lines at once: lower-case, separators to spaces, split"),
        ("last_poll", "the last poll of a range, which needs 1 record",
         "`max_records=5000`: 5000 decoded", "`max_records` = what the range still needs"),
        ("gc_collect", "`gc.collect()` after a task, in a worker with its imports",
         "stock daemon: every imported object walked", "daemon calls `gc.freeze()` once"),
        ("crc32c", "kafka-python's CRC-32C of a 1 MiB record batch",
         "pure Python", "`crc32c` package (now a dependency)"),
    )  # fmt: skip
    return [
        "**The small changes, before and after** (`bench/throughput/micro.py`, in one process, "
        "medians of repeats):",
        "",
        "| what | before | after | before | after | speed-up |",
        "|---|---|---|---|---|---|",
        *[
            f"| {what} | {old} | {new} | {ms(m[key]['before_s'])} | {ms(m[key]['after_s'])} "
            f"| {times(m[key]['speedup'])} |"
            for key, what, old, new in rows
        ],
    ]
