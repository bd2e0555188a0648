"""Spark's own word count on the structured engine's Kafka source: the floor under it.

bench/peers/spark_peer.py's query, `groupBy(word).count()` in update mode to the `noop` sink,
reading the topic through the structured engine's own Kafka data source, with the
engine's Spark settings (RocksDB with changelog checkpointing, the preloaded worker
daemon) and JVM launch (the class archive): what Structured Streaming costs on this
machine before anything the engine adds (the sinks, snapshots, bases, the metrics file,
and, unless the run is given `--app-tokenizer`, the DStream jobs' tokenizer).
bench/peers/engines.py runs it beside both engines, in the same invocation and the same
configuration (capped batches, restarts after kill -9, a state of many keys), so that a
target the floor alone misses shows as such.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S
from bench.harness.corpus import PARTITIONS, WORDS_PER_LINE, load_topic
from bench.harness.rates import batch_figures, steady_batches
from bench.peers.spark_peer import ENGINE_SETTINGS, StructuredRun
from bench.state.recovery import recovery_figures
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import generated_lines, produce


def _start(base: Path, bootstrap: str, topic: str, cap: int, *extra: str) -> StructuredRun:
    """The plain word count on `topic`, at most `cap` records a partition per micro-batch.

    extra: more arguments of its run (`--app-tokenizer`)."""
    return StructuredRun.start(
        base, None, base / "checkpoint", "--kafka", f"{bootstrap},{topic},{cap}",
        ENGINE_SETTINGS, *extra,
    )  # fmt: skip


def _rows(events: list[dict[str, Any]]) -> int:
    return sum(int(e.get("rows") or 0) for e in events)


def _read_at_least(lines: int, events: list[dict[str, Any]]) -> bool:
    return _rows(events) >= lines


def plain_rate(
    workdir: Path,
    name: str,
    bootstrap: str,
    topic: str,
    lines: int,
    batch_lines: int,
    *extra: str,
    skip_lines: int = 0,
) -> dict[str, Any]:
    """bench/rates.app_rate's figures for the plain word count: a preloaded topic read in
    equal capped micro-batches, the steady ones (after the first two, or after those that
    read the first `skip_lines` lines, and before the last), each its whole trigger.

    extra: more arguments of its run (`--app-tokenizer`)."""
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))  # as app_rate caps the app
    base = workdir / name
    base.mkdir(parents=True)
    run = _start(base, bootstrap, topic, rate * BATCH_S, *extra)
    try:
        events = run.wait_for(partial(_read_at_least, lines), timeout=120 + lines / 50)
    finally:
        run.stop()
    busy = [e for e in events if e.get("rows") and e.get("trigger_ms")]
    steady = steady_batches(busy, [int(e["rows"]) for e in busy], skip_lines)
    return {
        "batch_lines": PARTITIONS * rate * BATCH_S,
        **batch_figures([(int(e["rows"]), e["trigger_ms"] / 1000) for e in steady]),
    }


def plain_recovery(workdir: Path, bootstrap: str, runs: int, backlog: int) -> dict[str, Any]:
    """bench/recovery.recovery for the plain word count: seconds from a restart after
    kill -9 (`backlog` lines produced while it was down) to its first completed micro-batch,
    and to the backlog read."""
    topic = load_topic(bootstrap, 1000, seed=2)
    base = workdir / "recovery-plain"
    base.mkdir(parents=True)
    sent = 1000
    run = _start(base, bootstrap, topic, 0)
    first: list[float] = []
    caught_up: list[float] = []
    try:
        run.wait_for(partial(_read_at_least, sent), 180)
        for number in range(runs):
            time.sleep(6)  # as bench/state/recovery.py waits before its kill
            run.kill9()
            lines = generated_lines(WORDS_PER_LINE, 100_000, 100 + number)
            produce(KafkaConnection(bootstrap), topic, lines, backlog, 0, PARTITIONS)
            sent += backlog
            run = _start(base, bootstrap, topic, 0)
            first.append(run.first_batch_s())
            # A micro-batch replayed after a kill is in the progress twice: >= is enough.
            run.wait_for(partial(_read_at_least, sent), 300)
            caught_up.append(time.time() - run.started)
    finally:
        run.stop()
    return recovery_figures(backlog, first, caught_up)


def plain_runner(workdir: Path, name: str, *args: Any) -> Callable[[str], dict[str, Any]]:
    """plain_rate(workdir, name, *args) as a run of bench/rates.interleaved (its name gets a
    suffix)."""
    return lambda suffix: plain_rate(workdir, f"{name}-{suffix}", *args)
