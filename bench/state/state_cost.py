"""Cost against the state size: an idle batch and a 20,000-line batch at 10k, 100k and 1M
keys in the exact configuration (files + console sinks, snapshots on); at a million keys
also the memory, and the batches that write a snapshot, with snapshots on and off.

Per state size a topic holds every key once, then Zipf lines over the same keys
(bench/state/state_size.py's `key_topic`). The app reads it in equal capped batches, then runs
on with nothing to read: the batches after the keys are loaded are the busy ones, those
that read nothing after the topic is read the idle ones. Batches that write periodically
are reported apart (bench/harness/periodic.py), as are the runs of each side of a comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.app import EXACT_CHECKPOINT_BATCHES
from bench.harness.periodic import aligned, periodic_figures
from bench.harness.rates import idle_batches, interleaved, runner
from bench.state.state_size import key_topic
from bench.throughput.exact import THIS_CHECKOUT, Side
from streaming_app.common.metrics_record import BatchMetrics

STATE_KEYS = (10_000, 100_000, 1_000_000)
MILLION = 1_000_000
BATCH_LINES = 20_000
# Batches of Zipf lines after the keys, and idle batches after those: each more than a
# checkpoint interval, so that each kind has an aligned batch and a Spark checkpoint.
BUSY_BATCHES = 12
IDLE_BATCHES = 12
# The variants run: the exact configuration, and (at a million keys) without snapshots,
# which tells a snapshot's cost from the files sink's base in the aligned batches.
SNAPSHOTS, NO_SNAPSHOTS = "snapshots on", "snapshots off"
VARIANT_ARGS = {SNAPSHOTS: (), NO_SNAPSHOTS: ("--snapshot-keep", "0")}


def loaded(batches: list[BatchMetrics], loading: int) -> list[BatchMetrics]:
    """The batches that started with every key in the state: after `loading` lines."""
    after, read = [], 0
    for batch in batches:
        if read >= loading:
            after.append(batch)
        read += batch.records or 0
    return after


def cost_figures(
    total_lines: int, every: int
) -> Callable[[list[BatchMetrics], list[BatchMetrics]], Any]:
    """app_rate's per_batch: the busy (steady) and idle batches' periodic figures."""

    def figures(batches: list[BatchMetrics], steady: list[BatchMetrics]) -> Any:
        first = min(b.batch_time_ms for b in batches)
        idle = idle_batches(batches, total_lines)
        return {
            **periodic_figures(steady, first, every, "busy_"),
            **periodic_figures(idle, first, every, "idle_"),
        }

    return figures


def aligned_or_not(loading: int, every: int) -> Callable[[list[BatchMetrics]], Any]:
    """app_rate's during: the loaded state's aligned batches (a snapshot) and the others."""

    def split(batches: list[BatchMetrics]) -> dict[str, list[BatchMetrics]]:
        after = loaded(batches, loading)
        marked = [(aligned(b.batch_time_ms, b.batch_interval_ms, every), b) for b in after]
        return {
            "aligned": [b for is_aligned, b in marked if is_aligned],
            "others": [b for is_aligned, b in marked if not is_aligned],
        }

    return split


def state_cost(
    workdir: Path,
    bootstrap: str,
    plan: list[tuple[int, str]],
    rounds: int,
    batch_lines: int = BATCH_LINES,
    busy: int = BUSY_BATCHES,
    idle: int = IDLE_BATCHES,
    every: int = EXACT_CHECKPOINT_BATCHES,
    sides: tuple[Side, ...] = THIS_CHECKOUT,
) -> dict[str, Any]:
    """Per (keys, variant) of `plan`, and per side, the figures of the busy and the idle
    batches and the memory (medians over `rounds` interleaved runs)."""
    topics = {keys: key_topic(bootstrap, keys, busy * batch_lines) for keys in {k for k, _ in plan}}
    runs = {}
    for keys, variant in plan:
        topic, loading = topics[keys]
        total = loading + busy * batch_lines
        for index, (label, code, *_) in enumerate(sides):
            name = f"cost-{keys}-{'on' if variant == SNAPSHOTS else 'off'}-side{index}"
            runs[keys, variant, label] = runner(
                workdir, name, bootstrap, topic, total, batch_lines, *VARIANT_ARGS[variant],
                exact=every, idle=idle, code=code,
                # After the keys, and not in the JVM's first two batches.
                skip_lines=max(loading, 2 * batch_lines),
                per_batch=cost_figures(total, every), during=aligned_or_not(loading, every),
            )  # fmt: skip
    found = interleaved(rounds, runs, each=("busy_median_s", "idle_median_s"))
    return {
        "batch_lines": batch_lines,
        "busy_batches": busy,
        "idle_batches": idle,
        "checkpoint_batches": every,
        "rows": [
            {"keys": keys, "variant": variant, "side": label, **figures}
            for (keys, variant, label), figures in found.items()
        ],
    }


def _cell(value: Any, unit: str = " s") -> str:
    return "—" if value is None else f"{value}{unit}"


def _runs(values: list[Any]) -> str:
    return ", ".join(_cell(v) for v in values)


def _head(c: dict[str, Any], what: str) -> str:
    return (
        f"{what} (Kafka source, `local[2]`, 2 s batches, `--sink files --sink console`, a "
        f"state checkpoint and a snapshot every {c['checkpoint_batches']} batches; the topic "
        f"holds every key once, then {c['busy_batches']} batches of {c['batch_lines']:,} Zipf "
        f"lines over the keys; then the app runs on for {c['idle_batches']} batches with "
        "nothing to read. Busy: the batches after the keys are loaded (and after the first "
        "two); idle: the batches that read nothing. Aligned: the batches whose time is a "
        "multiple of the checkpoint interval, which write the snapshot (and the files "
        "sink's base where it writes one); checkpoint: those that wrote Spark's state "
        f"checkpoint. Medians of {c['rows'][0]['runs']} runs, interleaved):"
    )


def cost_vs_state_report(c: dict[str, Any]) -> list[str]:
    """The cost-against-state-size table of docs/benchmarks.md (snapshots on)."""
    sides = len({r["side"] for r in c["rows"]}) > 1
    # Sorted stably: each size's sides stay in their order (before, after).
    rows = sorted((r for r in c["rows"] if r["variant"] == SNAPSHOTS), key=lambda r: r["keys"])
    size = f"{c['batch_lines']:,}-line batch"
    return [
        _head(c, "**Cost against the state size**"),
        "",
        f"| keys{' | revision' if sides else ''} | idle batch | each run | idle: aligned | "
        f"idle: checkpoint | idle: slowest | {size} | each run | busy: aligned | "
        "busy: checkpoint | busy: slowest |",
        "|---|" + ("---|" if sides else "") + "---|" * 10,
        *[
            f"| {r['keys']:,}{' | ' + r['side'] if sides else ''} | "
            f"{_cell(r['idle_median_s'])} | {_runs(r['runs_idle_median_s'])} | "
            f"{_cell(r['idle_aligned_s'])} | {_cell(r['idle_checkpoint_s'])} | "
            f"{_cell(r['idle_max_s'])} | {_cell(r['busy_median_s'])} | "
            f"{_runs(r['runs_busy_median_s'])} | {_cell(r['busy_aligned_s'])} | "
            f"{_cell(r['busy_checkpoint_s'])} | {_cell(r['busy_max_s'])} |"
            for r in rows
        ],
    ]


def million_report(c: dict[str, Any]) -> list[str]:
    """The state of a million keys (the largest measured) for docs/benchmarks.md: batch
    times against the targets, the snapshot's batches and the memory."""
    keys = max(r["keys"] for r in c["rows"])
    rows = sorted(
        (r for r in c["rows"] if r["keys"] == keys), key=lambda r: r["variant"] != SNAPSHOTS
    )
    on = {r["side"]: r for r in rows if r["variant"] == SNAPSHOTS}
    off = {r["side"]: r for r in rows if r["variant"] == NO_SNAPSHOTS}
    lines = [
        _head(c, f"**A state of {keys:,} keys, files + console sinks**")
        + " Memory: the peak resident memory over the whole run (VmHWM; the Python "
        "workers summed by Pss at the sample with most), and the largest sample (every "
        "0.25 s) while the loaded state's aligned batches ran, against the other batches.",
        "",
        f"| | {c['batch_lines']:,}-line batch (target ≤ 1.0 s) | idle batch (target ≤ 0.3 s) | "
        "aligned batches (idle; busy) | checkpoint batches (idle; busy) | driver, peak | "
        "driver while the aligned batches ran | driver, other batches | JVM, peak | "
        "JVM while the aligned batches ran | largest Python worker | Python workers "
        "together (Pss) | Python workers while the aligned batches ran |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']}{', ' + r['side'] if r['side'] else ''} | "
            f"{_cell(r['busy_median_s'])} | {_cell(r['idle_median_s'])} | "
            f"{_cell(r['idle_aligned_s'])}; {_cell(r['busy_aligned_s'])} | "
            f"{_cell(r['idle_checkpoint_s'])}; {_cell(r['busy_checkpoint_s'])} | "
            f"{_cell(r['driver_mib'], ' MiB')} | {_cell(r['aligned_driver_mib'], ' MiB')} | "
            f"{_cell(r['others_driver_mib'], ' MiB')} | {_cell(r['jvm_mib'], ' MiB')} | "
            f"{_cell(r['aligned_jvm_mib'], ' MiB')} | {_cell(r['largest_worker_mib'], ' MiB')} | "
            f"{_cell(r['workers_together_mib'], ' MiB')} | "
            f"{_cell(r['aligned_workers_mib'], ' MiB')} |"
        )
    for side, with_snapshot in on.items():
        without = off.get(side)
        if without and with_snapshot["idle_aligned_s"] and without["idle_aligned_s"]:
            on_s, off_s = with_snapshot["idle_aligned_s"], without["idle_aligned_s"]
            lines += [
                "",
                f"A snapshot of {keys:,} keys{f' ({side})' if side else ''}: an aligned idle "
                f"batch takes {on_s} s with snapshots on and {off_s} s with them off "
                f"({on_s - off_s:+.3f} s).",
            ]
    return lines
