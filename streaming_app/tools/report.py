"""Read the per-batch metrics file (JSON lines), summarize it, and plot it."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from streaming_app.common.metrics_record import BatchMetrics, delay_growing
from streaming_app.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_MISSING = "--plot needs matplotlib: pip install 'streaming-app[plot]'"


@dataclass(frozen=True)
class Summary:
    """What `streaming-app report` prints; durations in ms, None where never known."""

    batches: int
    engines: tuple[str, ...]  # that wrote the batches, sorted (old files: `dstream`)
    first_batch_ms: int
    last_batch_ms: int
    interval_ms: int  # of the last batch
    span_s: float
    records: int | None  # None: no batch counted its records (files source)
    throughput: float | None  # records per second over the span
    processing_p50: int | None
    processing_p95: int | None
    processing_max: int | None
    scheduling_p50: int | None
    scheduling_p95: int | None
    scheduling_p99: int | None
    scheduling_max: int | None
    total_p50: int | None
    total_p95: int | None
    total_p99: int | None
    total_max: int | None
    processing_known: int  # batches whose processing time is known
    over_interval: int  # of those, how many took longer than their batch interval
    over_interval_pct: float | None
    kafka_lag_max: int | None
    kafka_lag_last: int | None
    delay_growing: bool


def percentile(values: Sequence[int], pct: float) -> int | None:
    """Nearest-rank percentile: the smallest value with at least pct% of values <= it.

    No interpolation, so it is always one of the values; None if there are none.
    """
    if not 0 < pct <= 100:
        raise ValueError(f"percentile {pct} is not in (0, 100]")
    if not values:
        return None
    ordered = sorted(values)
    # pct * n first: pct / 100 * n makes 0.07 * 100 = 7.000000000000001, rank 8 not 7.
    rank = math.ceil(pct * len(ordered) / 100)
    return ordered[rank - 1]


def _known(values: Sequence[int | None]) -> list[int]:
    return [v for v in values if v is not None]


def summarize(records: Sequence[BatchMetrics]) -> Summary:
    """Summary of batches sorted by batch time; ValueError if there are none."""
    if not records:
        raise ValueError("no batches to summarize")
    first, last = records[0], records[-1]
    # The last batch covers one interval after its batch time.
    span_s = (last.batch_time_ms - first.batch_time_ms + last.batch_interval_ms) / 1000
    counted = _known([b.records for b in records])
    total = sum(counted) if counted else None
    processing = _known([b.processing_ms for b in records])
    scheduling = _known([b.scheduling_delay_ms for b in records])
    delays = _known([b.total_delay_ms for b in records])
    lags = _known([b.kafka_lag for b in records])
    over = sum(
        1 for b in records if b.processing_ms is not None and b.processing_ms > b.batch_interval_ms
    )
    return Summary(
        batches=len(records),
        # Files from before the `engine` field were all written by the DStream engine.
        engines=tuple(sorted({b.engine or "dstream" for b in records})),
        first_batch_ms=first.batch_time_ms,
        last_batch_ms=last.batch_time_ms,
        interval_ms=last.batch_interval_ms,
        span_s=span_s,
        records=total,
        throughput=None if total is None else total / span_s,
        processing_p50=percentile(processing, 50),
        processing_p95=percentile(processing, 95),
        processing_max=max(processing, default=None),
        scheduling_p50=percentile(scheduling, 50),
        scheduling_p95=percentile(scheduling, 95),
        scheduling_p99=percentile(scheduling, 99),
        scheduling_max=max(scheduling, default=None),
        total_p50=percentile(delays, 50),
        total_p95=percentile(delays, 95),
        total_p99=percentile(delays, 99),
        total_max=max(delays, default=None),
        processing_known=len(processing),
        over_interval=over,
        over_interval_pct=100 * over / len(processing) if processing else None,
        kafka_lag_max=max(lags, default=None),
        kafka_lag_last=lags[-1] if lags else None,
        delay_growing=delay_growing(scheduling, last.batch_interval_ms),
    )


def _seconds(ms: int | None) -> str:
    return "unknown" if ms is None else f"{ms / 1000:.3f} s"


def _time(ms: int) -> str:
    utc = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return f"{utc:%Y-%m-%d %H:%M:%S} UTC ({ms})"


def _stats(p50: int | None, p95: int | None, p99: int | None, top: int | None) -> str:
    if top is None:  # no known value at all
        return "unknown"
    # Columns line up across rows; a row without p99 leaves its column blank.
    cells = [("p50", p50), ("p95", p95), ("p99", p99), ("max", top)]
    return "  ".join(f"{name} {_seconds(v):>9}" if v is not None else " " * 13 for name, v in cells)


def format_summary(summary: Summary, skipped: int) -> list[str]:
    """Aligned `label  value` lines for the console."""
    s = summary
    if s.over_interval_pct is None:
        over = "unknown (no processing times)"
    else:
        over = (
            f"{s.over_interval:,} of {s.processing_known:,} batches ({s.over_interval_pct:.1f}%)"
            " took longer than the batch interval to process"
        )
    lag = "unknown"
    if s.kafka_lag_max is not None:
        lag = f"max {s.kafka_lag_max:,}  last {s.kafka_lag_last:,} records"
    trend = (
        "GROWING: the app cannot keep up (lower the rate cap or add cores)"
        if s.delay_growing
        else "not growing"
    )
    rows = [
        ("batches", f"{s.batches:,}"),
        ("malformed lines", f"{skipped:,} skipped"),
        ("engine", ", ".join(s.engines)),
        ("first batch", _time(s.first_batch_ms)),
        ("last batch", _time(s.last_batch_ms)),
        ("batch interval", _seconds(s.interval_ms)),
        ("span", f"{s.span_s:,.1f} s"),
        ("records", "unknown" if s.records is None else f"{s.records:,}"),
        (
            "throughput",
            "unknown" if s.throughput is None else f"{s.throughput:,.1f} records/s",
        ),
        ("processing time", _stats(s.processing_p50, s.processing_p95, None, s.processing_max)),
        (
            "scheduling delay",
            _stats(s.scheduling_p50, s.scheduling_p95, s.scheduling_p99, s.scheduling_max),
        ),
        ("total delay", _stats(s.total_p50, s.total_p95, s.total_p99, s.total_max)),
        ("over interval", over),
        ("kafka lag", lag),
        ("scheduling trend", trend),
    ]
    width = max(len(label) for label, _ in rows)
    return [f"{label:<{width}}  {value}" for label, value in rows]


def _rate(batch: BatchMetrics) -> float:
    if batch.records is None:
        return math.nan  # a gap: unknown is not zero
    return batch.records * 1000 / batch.batch_interval_ms


def _delay_s(field: str) -> Callable[[BatchMetrics], float]:
    def seconds(batch: BatchMetrics) -> float:
        ms: int | None = getattr(batch, field)
        # NaN leaves a gap in the line instead of drawing an unknown delay as zero.
        return math.nan if ms is None else ms / 1000

    return seconds


def _series(
    records: Sequence[BatchMetrics], value: Callable[[BatchMetrics], float]
) -> tuple[list[float], list[float]]:
    """x (seconds since the first batch) and y, broken by a NaN where a run restarted."""
    start = records[0].batch_time_ms if records else 0
    xs: list[float] = []
    ys: list[float] = []
    previous: BatchMetrics | None = None
    for batch in records:
        # Batch times jump when the app was down: do not draw a line across the gap.
        if previous and batch.batch_time_ms - previous.batch_time_ms > batch.batch_interval_ms:
            xs.append(math.nan)
            ys.append(math.nan)
        xs.append((batch.batch_time_ms - start) / 1000)
        ys.append(value(batch))
        previous = batch
    return xs, ys


def plot(records: Sequence[BatchMetrics], png_path: str | os.PathLike[str]) -> Figure:
    """Draw throughput and delays over time since the first batch to a PNG; returns the figure.

    The file is replaced atomically. ConfigError if matplotlib is not installed.
    """
    try:
        # A bare Figure on the Agg canvas: headless, and no pyplot global state to leak.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(PLOT_MISSING) from None
    fig = Figure(figsize=(10, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    rate, delay = fig.subplots(2, 1, sharex=True)
    rate.plot(*_series(records, _rate), ".-", ms=3)
    rate.set_ylabel("throughput (records/s)")
    rate.set_ylim(bottom=0)
    for label, field in (
        ("processing", "processing_ms"),
        ("scheduling delay", "scheduling_delay_ms"),
        ("total delay", "total_delay_ms"),
    ):
        xy = _series(records, _delay_s(field))
        delay.plot(*xy, ".-", ms=3, label=label)
    # One line per interval in use: a restart may have changed it.
    for n, interval_ms in enumerate(sorted({b.batch_interval_ms for b in records})):
        label = "batch interval" if n == 0 else "_nolegend_"
        delay.axhline(interval_ms / 1000, color="red", linestyle="--", linewidth=1, label=label)
    delay.set_ylabel("delay (s)")
    delay.set_ylim(bottom=0)
    delay.set_xlabel("time since the first batch (s)")
    delay.legend(loc="upper left")
    _save_png(fig, os.fspath(png_path))
    return fig


def _save_png(fig: Figure, path: str) -> None:
    # Temp + rename: a reader never sees half a PNG. Not mkstemp: its 0600 would stick.
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            fig.savefig(out, format="png", dpi=100)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
