"""Probe words and their latencies: bookkeeping, percentiles, the target and the report.

A probe is one record holding one word never seen before (`zzprobe000123`), produced with
its timestamp; a reader of the sink notes when the word first becomes visible there. The
latency is the visible time minus the record's timestamp. Pure: no broker, no Spark.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PROBE_PREFIX = "zzprobe"
# The first word after every probe word in any collation that sorts by characters: a
# range scan [PROBE_PREFIX, PROBE_END) finds them all through the totals' primary key.
PROBE_END = "zzprobf"


def probe_word(number: int) -> str:
    """The number-th probe's word."""
    return f"{PROBE_PREFIX}{number:06d}"


def probe_words(words: Iterable[str]) -> set[str]:
    """The probe words among `words`."""
    return {w for w in words if w.startswith(PROBE_PREFIX)}


@dataclass
class ProbeBook:
    """When each probe was produced (its record's timestamp, epoch ms) and when a reader
    first saw its word in the sink (epoch ms). Written by two threads: the sender, the reader."""

    sent: dict[str, int] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sent_at(self, word: str, timestamp_ms: int) -> None:
        """The probe's record was produced with this timestamp."""
        with self._lock:
            self.sent[word] = timestamp_ms

    def saw(self, words: Iterable[str], at_ms: int) -> None:
        """A reader found these words at `at_ms`; only the first sight of each counts."""
        with self._lock:
            for word in words:
                self.seen.setdefault(word, at_ms)

    def latencies_ms(self) -> list[int]:
        """Each sent probe's latency, of those seen, in the order they were sent."""
        with self._lock:
            return [
                self.seen[w] - ms for w, ms in sorted(self.sent.items(), key=lambda i: i[1])
                if w in self.seen
            ]  # fmt: skip

    def missing(self) -> list[str]:
        """The sent probes never seen."""
        with self._lock:
            return sorted(w for w in self.sent if w not in self.seen)

    def all_seen(self) -> bool:
        """Whether every sent probe has been seen."""
        with self._lock:
            return all(w in self.seen for w in self.sent)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-th quantile (0 < q <= 1): the smallest value with at least q of
    the values at or below it (of 100 values, p99 is the second largest); NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def latency_figures(book: ProbeBook) -> dict[str, Any]:
    """p50, p99 and max of the probes' latencies in seconds, how many were seen and missed."""
    seconds = [ms / 1000 for ms in book.latencies_ms()]
    return {
        "probes": len(seconds),
        "missing": len(book.missing()),
        "p50_s": round(percentile(seconds, 0.5), 3),
        "p99_s": round(percentile(seconds, 0.99), 3),
        "max_s": round(max(seconds), 3) if seconds else float("nan"),
        "min_s": round(min(seconds), 3) if seconds else float("nan"),
    }


def target_s(interval_s: float, median_batch_s: float) -> float:
    """The target for p99: the batch interval plus twice the median batch time."""
    return round(interval_s + 2 * median_batch_s, 3)


def batch_figures(batch_s: list[float], delays_s: list[float], interval_s: float) -> dict[str, Any]:
    """The median batch time of a run's window, and whether it kept up (as the throughput
    benchmarks decide it, bench/harness/rates.keeps_up): the median batch within the
    interval, and the scheduling delay (where the run reports one: not the peer) not
    growing from the window's first batch to its last by more than half a second."""
    median = statistics.median(batch_s) if batch_s else float("nan")
    return {
        "batches": len(batch_s),
        "median_batch_s": round(median, 3),
        "max_batch_s": round(max(batch_s), 3) if batch_s else float("nan"),
        "max_delay_s": round(max(delays_s), 3) if delays_s else None,
        "kept_up": median <= interval_s and (not delays_s or delays_s[-1] <= delays_s[0] + 0.5),
    }


def drained(delays_ms: list[int | None]) -> bool:
    """Whether a DStream run has worked off its start-up backlog: its last batch's
    scheduling delay under half a second (the first batches of a new JVM are slow, and a
    batch near the interval drains the delay they leave slowly)."""
    return bool(delays_ms) and (delays_ms[-1] or 0) < 500


def met(row: dict[str, Any]) -> bool:
    """Whether a run's p99 is within its target (none seen: not met)."""
    p99, target = row["p99_s"], row["target_s"]
    return bool(row["probes"]) and not math.isnan(p99) and p99 <= target


def _s(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.2f} s"


def latency_report(found: dict[str, Any]) -> list[str]:
    """The table of a latency run: engine x sink x rate, the peer beside the app."""
    lines = [
        f"End-to-end latency ({found['seconds']} s of probes every {found['probe_every_s']} s a "
        f"run after {found['warmup_s']} s of warm-up; sustained rate taken as "
        + ", ".join(f"{w:,} words/s ({e})" for e, w in found["sustained"].items())
        + f"; the reader polls every {found['poll_s']} s):",
        "",
        "| engine | sink | interval | rate (words/s) | produced | probes (missed) | p50 | p99 "
        "| max | median batch | target (interval + 2 x median) | p99 met? | kept up (max delay) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in found["rows"]:
        delay = "" if r["max_delay_s"] is None else f" ({_s(r['max_delay_s'])})"
        lines.append(
            f"| {r['engine']} | {r['sink']} | {r.get('interval_s', 2)} s | "
            f"{r['words_per_s']:,} ({r['share']:.0%}) | "
            f"{r['produced_words_per_s']:,} | {r['probes']} ({r['missing']}) | "
            f"{_s(r['p50_s'])} | {_s(r['p99_s'])} | {_s(r['max_s'])} | "
            f"{_s(r['median_batch_s'])} | {_s(r['target_s'])} | {'yes' if met(r) else 'no'} | "
            f"{'yes' if r['kept_up'] else 'no'}{delay} |"
        )
    return lines
