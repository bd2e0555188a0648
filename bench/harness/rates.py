"""A capped app run's figures over its steady batches, and runs repeated round after round."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.harness.app import BATCH_S, AppRun, exact_args, kafka_args
from bench.harness.corpus import PARTITIONS, WORDS_PER_LINE
from bench.harness.memory import RssTimeline, batch_window, peak_during
from bench.harness.processes import PeakMemory, cpu_seconds, session_cpu_s
from bench.harness.results import median
from streaming_app.common.metrics_record import BatchMetrics

T = TypeVar("T")


def app_rate(
    workdir: Path,
    name: str,
    bootstrap: str,
    topic: str,
    lines: int,
    batch_lines: int,
    *extra: str,
    skip_lines: int = 0,
    memory: bool = False,
    code: Path | None = None,
    per_batch: Callable[[list[BatchMetrics], list[BatchMetrics]], dict[str, Any]] | None = None,
    exact: int = 0,
    idle: int = 0,
    during: Callable[[list[BatchMetrics]], dict[str, list[BatchMetrics]]] | None = None,
    driver_cpu: bool = False,
    cpu: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Read a preloaded topic in equal capped batches; the steady batches' figures.

    Steady: after the first two batches (JVM warm-up), or after the batches that read the
    first `skip_lines` lines, and before the last (partial) batch. With `memory`, the peak
    resident memory of the app's processes too. `code`: run the app from that copy.
    `per_batch`: more figures, from (every batch of the run, the steady batches).
    `exact`: the configuration for exact totals (harness.exact_args), with a state
    checkpoint every `exact` batches. `idle`: run on, after the topic is read, until that
    many batches have read nothing. `during`: batches by name (from every batch of the
    run); the peak memory of each process kind while those ran, as `<name>_<kind>_mib`.
    `driver_cpu`: the CPU seconds of the driver's Python process until the input was read
    (`driver_cpu_s`). `cpu`: the CPU seconds of all the app's processes (driver, JVM,
    Python workers) from the end of its second busy batch (and of its first `skip_lines`
    lines) until the input was read, per
    1000 lines read meanwhile (`cpu_ms_per_kline`): on a shared machine a steadier
    measure than the batches' time. `env`: more environment for the app.
    """
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))  # records/s per partition
    args = kafka_args(workdir / name, bootstrap, topic, "--max-rate-per-partition", str(rate))
    if exact:
        args += exact_args(workdir / name, exact)
    app = AppRun.start(workdir, name, [*args, *extra], code=code, env=env)
    timeline = RssTimeline(app.proc.pid) if during else None
    peak = timeline or (PeakMemory(app.proc.pid) if memory else None)
    cpu_figures: dict[str, Any] = {}
    try:
        if cpu:
            warm = app.wait_for(
                lambda b: (
                    sum(1 for x in b if x.records) >= 2
                    and sum(x.records or 0 for x in b) >= skip_lines
                ),
                120 + lines / 50,
            )
            warm_cpu_s, warm_lines = session_cpu_s(app.proc.pid), sum(x.records or 0 for x in warm)
        done = app.wait_for(
            lambda b: (
                sum(x.records or 0 for x in b) >= lines and len(idle_batches(b, lines)) >= idle
            ),
            timeout=120 + lines / 50 + 3 * BATCH_S * idle,
        )
        if cpu:
            read = sum(x.records or 0 for x in done) - warm_lines
            used = session_cpu_s(app.proc.pid) - warm_cpu_s
            cpu_figures["cpu_ms_per_kline"] = round(1e6 * used / max(read, 1), 1)
    finally:
        memory_figures: dict[str, Any] = dict(peak.stop()) if peak else {}
        if driver_cpu:
            stat = Path(f"/proc/{app.proc.pid}/stat")
            memory_figures["driver_cpu_s"] = round(cpu_seconds(stat), 2)
        app.stop()
    batches = app.batches()
    if during and timeline:
        for label, chosen in during(batches).items():
            found = peak_during(timeline.samples, [batch_window(b) for b in chosen])
            memory_figures.update({f"{label}_{kind}": mib for kind, mib in found.items()})
    busy = [b for b in batches if b.records and b.processing_ms]
    steady = steady_batches(busy, [b.records or 0 for b in busy], skip_lines)
    return {
        "batch_lines": PARTITIONS * rate * BATCH_S,
        **batch_figures([(b.records or 0, (b.processing_ms or 0) / 1000) for b in steady]),
        "max_scheduling_delay_s": round(
            max((b.scheduling_delay_ms or 0 for b in steady), default=0) / 1000, 2
        ),
        "first_scheduling_delay_s": round((steady[0].scheduling_delay_ms or 0) / 1000, 2),
        "last_scheduling_delay_s": round((steady[-1].scheduling_delay_ms or 0) / 1000, 2),
        **memory_figures,
        **cpu_figures,
        **(per_batch(batches, steady) if per_batch else {}),
    }  # fmt: skip


def steady_batches(busy: list[T], records: list[int], skip_lines: int) -> list[T]:
    """The steady batches of a run's busy ones (`records`: each one's): after the first two
    (JVM warm-up), or after those that read the first `skip_lines` lines, and before the
    last (partial) one."""
    if skip_lines:
        read = list(itertools.accumulate(records))
        steady = [b for b, before in zip(busy, [0, *read], strict=False) if before >= skip_lines]
        return steady[:-1] or steady
    return busy[2:-1] or busy


def batch_figures(steady: list[tuple[int, float]]) -> dict[str, Any]:
    """Figures of the steady batches, each (records, processing seconds)."""
    seconds = [s for _, s in steady]
    records = sum(r for r, _ in steady)
    return {
        "batches": len(steady),
        "processing_s": round(median(seconds), 3),
        "words_per_s": round(median([r * WORDS_PER_LINE / s for r, s in steady])),
        "mean_words_per_s": round(records * WORDS_PER_LINE / max(sum(seconds), 1e-9)),
        "mean_processing_s": round(sum(seconds) / len(seconds), 3),
    }


def idle_batches(batches: list[BatchMetrics], after_lines: int) -> list[BatchMetrics]:
    """The batches that read nothing once `after_lines` lines had been read (an idle batch
    of a loaded state); batches of unknown records are not idle."""
    idle, read = [], 0
    for batch in batches:
        if read >= after_lines and batch.records == 0:
            idle.append(batch)
        read += batch.records or 0
    return idle


def keeps_up(figures: dict[str, Any]) -> bool:
    """Median processing within the interval, and the scheduling delay not growing (where
    the run knows it: bench/peers/plain.py's runs have none)."""
    return bool(
        figures["processing_s"] <= BATCH_S
        and figures.get("last_scheduling_delay_s", 0)
        <= figures.get("first_scheduling_delay_s", 0) + 0.5
    )


def runner(workdir: Path, name: str, *args: Any, **options: Any) -> Callable[[str], dict[str, Any]]:
    """app_rate(workdir, name, *args, **options) as a run of `interleaved` (its name gets
    a suffix)."""
    return lambda suffix: app_rate(workdir, f"{name}-{suffix}", *args, **options)


def interleaved(
    rounds: int,
    measure: dict[Any, Callable[[str], dict[str, Any]]],
    each: tuple[str, ...] = ("processing_s",),
    rotate: bool = False,
) -> dict[Any, dict[str, Any]]:
    """Every measurement `rounds` times, round after round (so that drift hits all alike).

    measure: key -> a run, given a name suffix; per key: the median of every figure over
    the runs that know it (None: not known in that run), `runs` (how many) and, for each
    field of `each`, `runs_<field>`: every run's value (`runs_processing_s` by default).
    rotate: each round starts one measurement later (so that none is always last while
    the machine's load drifts within a round).
    """
    found: dict[Any, list[dict[str, Any]]] = {key: [] for key in measure}
    keys = list(measure)
    for number in range(1, rounds + 1):
        shift = (number - 1) % len(keys) if rotate else 0
        for key in keys[shift:] + keys[:shift]:
            found[key].append(measure[key](f"r{number}"))
    merged = {}
    for key, runs in found.items():
        figures: dict[str, Any] = {}
        for field, value in runs[0].items():
            values = [r[field] for r in runs if r[field] is not None]  # None: not in that run
            if not values or isinstance(values[0], bool) or not isinstance(values[0], int | float):
                figures[field] = value
            else:
                middle = median(values)
                figures[field] = round(middle) if isinstance(values[0], int) else round(middle, 3)
        figures["runs"] = len(runs)
        for field in each:
            figures[f"runs_{field}"] = [r[field] for r in runs]
        figures["runs_kept_up"] = sum(keeps_up(r) for r in runs)
        merged[key] = figures
    return merged
