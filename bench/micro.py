"""Before/after of the small changes, in one process: each old and new path side by side.

- counting the words of ASCII lines: per line check NFC, match, lower-case each word
  (0.2.0), or 1000 lines at a time lower-cased, separators turned to spaces, split;
- the last poll of a planned range: kafka-python decodes up to max_records records
  (5000 before) where the range needed one;
- gc.collect() in a worker that has imported what the tasks run, before and after
  gc.freeze() (what the preloaded worker daemon does once);
- kafka-python's CRC-32C of a 1 MiB record batch, pure Python and the `crc32c` package.
"""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import VOCABULARY, WORDS_PER_LINE, load_topic, median
from streaming_app.produce import generated_lines
from streaming_app.text import DEFAULT_TOKEN_PATTERN, _compiled, count_words


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
import streaming_app.jobs, streaming_app.kafka_reader, streaming_app.keyed, streaming_app.text
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
        "**The small changes, before and after** (`bench/micro.py`, in one process, "
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
