"""The cost of the Prometheus endpoint: the exact configuration scraped every 5 s against
the same app without an endpoint.

Both sides run the README's setup for exact totals (bench/harness/side_runs.py: Kafka source,
`--sink files --sink console`, a state checkpoint and a snapshot every 10 batches,
`local[2]`, capped batches) on one tansu, each run on a topic of its own. The scraped
side adds `--metrics-port`; a scraper in this process GETs its `/metrics` every
SCRAPE_INTERVAL_S for the whole run, as a Prometheus server would (the server itself
is left out: it runs on another machine in production, and here its own CPU would
compete with the app's for the two cores). Sides alternate round after round. The report
says how many scrapes were answered and their size, so a side that was never scraped
cannot pass for a cheap one.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.rates import interleaved
from bench.harness.results import median
from bench.harness.side_runs import (
    BACKLOG_SEED,
    CORPUS_SEED,
    EACH,
    Side,
    corpus_counts,
    ratio,
    runner,
    seconds_cell,
    side_row,
    words_cell,
)
from bench.throughput.exact import HEADLINE_LINES
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker, free_port

OFF, SCRAPED = "no endpoint", "scraped every 5 s"
SCRAPE_LINES = HEADLINE_LINES
SCRAPE_INTERVAL_S = 5.0
# The target of issue 40: scraping costs at most 2% of a batch.
TARGET = 1.02
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Scraper:
    """GETs http://127.0.0.1:PORT/metrics every `interval` seconds, in a thread."""

    port: int
    interval: float
    answered: list[int] = field(default_factory=list)  # each answered scrape's bytes
    seconds: list[float] = field(default_factory=list)  # and how long it took
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        url = f"http://127.0.0.1:{self.port}/metrics"
        while not self._stop.wait(self.interval):
            started = time.monotonic()
            try:
                with _DIRECT.open(url, timeout=self.interval) as response:
                    size = len(response.read())
            except OSError:
                continue  # no app listening (the other side's run, or between runs)
            self.seconds.append(time.monotonic() - started)
            self.answered.append(size)

    @contextmanager
    def running(self) -> Iterator[Scraper]:
        """Scrape while the block runs."""
        thread = threading.Thread(target=self.run, name="scraper", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(timeout=self.interval + 5)


def scrape_cost(workdir: Path, batch_lines: int, rounds: int, every: int) -> dict[str, Any]:
    """Both sides `rounds` times, alternated; their medians, the ratios to the side without
    an endpoint, and what the scraper got."""
    lines = batch_lines * (every + 3)
    expected = corpus_counts(lines, CORPUS_SEED) + corpus_counts(batch_lines, BACKLOG_SEED)
    port = free_port()
    with (
        open(workdir / "scrape-tansu.log", "wb") as broker_log,
        DevBroker(log=broker_log) as broker,
        Scraper(port, SCRAPE_INTERVAL_S).running() as scraper,
    ):
        connection = KafkaConnection(broker.bootstrap)
        chosen = [
            Side(OFF, "off", connection),
            Side(SCRAPED, "scraped", connection, ("--metrics-port", str(port))),
        ]
        runs: dict[str, Callable[[str], dict[str, Any]]] = {
            side.label: runner(workdir, side, batch_lines, every, expected, prefix="scrape")
            for side in chosen
        }
        found = interleaved(rounds, runs, each=EACH, rotate=True)
    off = found[OFF]
    for figures in found.values():
        figures["ratio_processing"] = ratio(figures["processing_s"], off["processing_s"])
        figures["ratio_words"] = ratio(off["mean_words_per_s"], figures["mean_words_per_s"])
        for key in ("restart_first_batch_s", "app_cpu_s"):
            figures[f"ratio_{key}"] = ratio(figures[key], off[key])
    return {
        "batch_lines": batch_lines,
        "state_keys": len(expected),
        "checkpoint_batches": every,
        "rounds": rounds,
        "interval_s": SCRAPE_INTERVAL_S,
        "scrapes": len(scraper.answered),
        "scrape_bytes": round(median(scraper.answered)) if scraper.answered else 0,
        "scrape_ms": round(median(scraper.seconds) * 1000, 1) if scraper.seconds else None,
        "sides": [{"side": label, **figures} for label, figures in found.items()],
    }


def scrape_report(s: dict[str, Any]) -> list[str]:
    """The cost of scraping's table for docs/benchmarks.md."""
    size, every, rounds = s["batch_lines"], s["checkpoint_batches"], s["rounds"]
    lines = [
        f"**The cost of the Prometheus endpoint** (the exact configuration: Kafka source, "
        f"`local[2]`, 2 s batches of **{size:,} lines** of 10 words over a Zipf vocabulary of "
        "100k words, `--sink files --sink console`, a state checkpoint and a snapshot every "
        f"{every} batches, the state growing to {s['state_keys']:,} keys. Scraped: "
        f"`--metrics-port`, its `/metrics` fetched every {s['interval_s']:g} s by a client on "
        f"this machine ({s['scrapes']} scrapes answered, {s['scrape_bytes']:,} bytes and "
        f"{s['scrape_ms']} ms each, medians). Words/s of processing over {every} steady "
        "batches; CPU: the app's processes' CPU seconds over its batches after the first "
        "two; then `kill -9` past a state checkpoint and a restart to its first batch. "
        f"Medians of {rounds} runs of each side, alternated; each run in brackets):",
        "",
        "| | words/s of processing | processing of a batch | CPU | restart to the first "
        "batch | exact |",
        "|---|---|---|---|---|---|",
    ]
    seconds = ("processing_s", "app_cpu_s", "restart_first_batch_s")
    for r in s["sides"]:
        cells = [words_cell(r), *(seconds_cell(r, f) for f in seconds)]
        lines.append(side_row(r, cells, SCRAPED))
    scraped = next(r for r in s["sides"] if r["side"] == SCRAPED)
    lines.append(
        f"| **scraped / no endpoint** | **{scraped['ratio_words']}** (words/s without over "
        f"with) | {scraped['ratio_processing']} | {scraped['ratio_app_cpu_s']} | "
        f"{scraped['ratio_restart_first_batch_s']} | |"
    )
    met = scraped["ratio_words"] <= TARGET and s["scrapes"] > 0
    lines += [
        "",
        f"Target: scraping every 5 s costs at most {round((TARGET - 1) * 100)}% of a "
        f"{size:,}-line batch: **{'met' if met else 'not met'}** "
        f"({scraped['ratio_words']} on words/s, {scraped['ratio_app_cpu_s']} on CPU).",
    ]
    return lines
