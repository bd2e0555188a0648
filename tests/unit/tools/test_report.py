"""The metrics report: reading the JSON lines file, the summary, the CLI and the plot."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from numpy.typing import ArrayLike

from streaming_app.cli.report import report
from streaming_app.common.metrics_record import delay_growing, read_metrics
from streaming_app.errors import ConfigError
from streaming_app.tools.report import PLOT_MISSING, format_summary, percentile, plot, summarize

T0 = 1_732_280_000_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def batch(n: int, **fields: Any) -> dict[str, Any]:
    """The metrics line of the n-th batch of a 2 s interval run starting at T0."""
    line: dict[str, Any] = {
        "batch_time_ms": T0 + 2000 * n,
        "batch_interval_ms": 2000,
        "records": 100,
        "processing_ms": 400,
        "scheduling_delay_ms": 3,
        "total_delay_ms": 403,
        "kafka_lag": 0,
        "completed_ms": T0 + 2000 * n + 403,
    }
    line.update(fields)
    return line


def write(tmp_path: Path, *lines: dict[str, Any] | str) -> Path:
    path = tmp_path / "metrics.jsonl"
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(report, list(args))


# --- percentiles and delay_growing ---------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    values = [50, 15, 40, 35, 20]  # unsorted on purpose; sorted: 15 20 35 40 50
    assert percentile(values, 30) == 20  # rank ceil(1.5) = 2
    assert percentile(values, 40) == 20  # rank ceil(2.0) = 2, no interpolation
    assert percentile(values, 50) == 35  # rank ceil(2.5) = 3
    assert percentile(values, 100) == 50
    one_to_20 = list(range(1, 21))
    assert percentile(one_to_20, 95) == 19  # rank 19 exactly
    assert percentile(one_to_20, 99) == 20  # rank ceil(19.8) = 20
    # 0.07 * 100 is 7.000000000000001 in floats: the rank must still be 7.
    assert percentile(list(range(1, 101)), 7) == 7
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1], 0)


@pytest.mark.parametrize(
    ("delays", "window", "growing"),
    [
        ([0, 100, 500, 1500, 2500], 5, True),
        ([9000, 0, 100, 500, 1500, 2500], 5, True),  # only the last window counts
        ([0, 100, 500, 1500, 2000], 5, False),  # last equals the interval: not above it
        ([0, 100, 2500, 2500, 3000], 5, False),  # not strictly increasing
        ([0, 100, 3000, 2900, 3100], 5, False),  # dipped inside the window
        ([100, 500, 2500], 5, False),  # too few delays to tell
        ([100, 500, 2500], 3, True),
        ([], 5, False),
    ],
)
def test_delay_growing(delays: list[int], window: int, growing: bool) -> None:
    assert delay_growing(delays, 2000, window) is growing


def test_delay_growing_default_window_is_5() -> None:
    assert delay_growing([2100, 2200, 2300, 2400], 2000) is False
    assert delay_growing([2050, 2100, 2200, 2300, 2400], 2000) is True


# --- reading the file ---------------------------------------------------------------------


def test_repeated_batch_time_keeps_the_last_record_and_sorts(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        batch(0, records=10),
        batch(1, records=20),
        batch(2, records=30),
        # a restart: the recovered run replays batches 1 and 2, then goes on
        batch(1, records=21, kafka_lag=None),
        batch(2, records=31, kafka_lag=None),
        batch(4, records=50),
        batch(3, records=40),  # out of order: sorted by batch time all the same
    )
    records, skipped = read_metrics(path)
    assert skipped == 0
    assert [b.batch_time_ms - T0 for b in records] == [0, 2000, 4000, 6000, 8000]
    assert [b.records for b in records] == [10, 21, 31, 40, 50]
    assert records[1].kafka_lag is None


def test_malformed_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        batch(0),
        "",  # blank: not a record, not malformed either
        "[1, 2]",
        json.dumps(batch(1, records="many")),
        json.dumps(batch(2, processing_ms=True)),
        json.dumps(batch(2, batch_interval_ms=0)),
        json.dumps({k: v for k, v in batch(3).items() if k != "batch_time_ms"}),
        batch(4),
    )
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(batch(5))[:37])  # the driver was killed mid-write
    records, skipped = read_metrics(path)
    assert [b.batch_time_ms - T0 for b in records] == [0, 8000]
    assert skipped == 6


def test_nulls_and_minus_one_are_unknown(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        batch(0, processing_ms=None, scheduling_delay_ms=None, total_delay_ms=None),
        batch(1, processing_ms=-1, scheduling_delay_ms=-1, total_delay_ms=-1, kafka_lag=None),
    )
    records, skipped = read_metrics(path)
    assert skipped == 0
    for b in records:
        assert (b.processing_ms, b.scheduling_delay_ms, b.total_delay_ms) == (None, None, None)


# --- the summary --------------------------------------------------------------------------


def test_summary_of_a_small_hand_checked_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        batch(0, records=100, processing_ms=500, scheduling_delay_ms=0, total_delay_ms=500),
        batch(1, records=200, processing_ms=2500, scheduling_delay_ms=10, total_delay_ms=2510),
        batch(2, records=300, processing_ms=1000, scheduling_delay_ms=510, total_delay_ms=1510),
        batch(3, records=400, processing_ms=None, scheduling_delay_ms=None, total_delay_ms=None),
    )
    s = summarize(read_metrics(path)[0])
    assert s.batches == 4
    assert (s.first_batch_ms, s.last_batch_ms) == (T0, T0 + 6000)
    assert s.span_s == 8.0  # 6 s from first to last batch time, plus one 2 s interval
    assert s.records == 1000
    assert s.throughput == 125.0
    # processing known: 500 1000 2500 -> p50 rank ceil(1.5)=2, p95 rank ceil(2.85)=3
    assert (s.processing_p50, s.processing_p95, s.processing_max) == (1000, 2500, 2500)
    assert (s.scheduling_p50, s.scheduling_p95, s.scheduling_p99) == (10, 510, 510)
    assert s.scheduling_max == 510
    assert (s.total_p50, s.total_p95, s.total_p99, s.total_max) == (1510, 2510, 2510, 2510)
    assert (s.processing_known, s.over_interval) == (3, 1)  # only 2500 > 2000
    assert s.over_interval_pct == pytest.approx(100 / 3)
    assert (s.kafka_lag_max, s.kafka_lag_last) == (0, 0)
    assert s.delay_growing is False


def test_kafka_lag_max_and_last_known(tmp_path: Path) -> None:
    lags = [5, 50, None, 7, None]
    path = write(tmp_path, *(batch(n, kafka_lag=lag) for n, lag in enumerate(lags)))
    s = summarize(read_metrics(path)[0])
    assert (s.kafka_lag_max, s.kafka_lag_last) == (50, 7)
    no_lag = write(tmp_path, *(batch(n, kafka_lag=None) for n in range(3)))
    s = summarize(read_metrics(no_lag)[0])
    assert (s.kafka_lag_max, s.kafka_lag_last) == (None, None)
    assert any(line.split() == ["kafka", "lag", "unknown"] for line in format_summary(s, 0))


def test_all_null_delays_are_unknown_not_zero(tmp_path: Path) -> None:
    nulls = {"processing_ms": None, "scheduling_delay_ms": None, "total_delay_ms": None}
    path = write(tmp_path, *(batch(n, **nulls) for n in range(3)))
    s = summarize(read_metrics(path)[0])
    assert (s.processing_p50, s.scheduling_p99, s.total_max) == (None, None, None)
    assert (s.over_interval, s.over_interval_pct) == (0, None)
    lines = format_summary(s, 0)
    assert any(line.split() == ["processing", "time", "unknown"] for line in lines)
    assert any(line.split() == ["total", "delay", "unknown"] for line in lines)


def test_growing_scheduling_delay_is_flagged(tmp_path: Path) -> None:
    delays = [0, 0, 300, 900, 1800, 2600, 3500]
    path = write(tmp_path, *(batch(n, scheduling_delay_ms=d) for n, d in enumerate(delays)))
    s = summarize(read_metrics(path)[0])
    assert s.delay_growing is True
    assert any("GROWING" in line for line in format_summary(s, 0))
    steady = write(tmp_path, *(batch(n, scheduling_delay_ms=d) for n, d in enumerate(delays[:5])))
    assert summarize(read_metrics(steady)[0]).delay_growing is False  # 1800 < 2000


def test_summary_lines_are_aligned(tmp_path: Path) -> None:
    # 2000 ms equals the interval: not over it.
    path = write(tmp_path, batch(0), batch(1, processing_ms=3000), batch(2, processing_ms=2000))
    lines = format_summary(summarize(read_metrics(path)[0]), 2)
    # Where each value starts: after the label (words one space apart) and its padding.
    starts = {len(line) - len(line.split("  ", 1)[1].lstrip(" ")) for line in lines}
    assert starts == {len("scheduling delay  ")}, lines
    assert "malformed lines   2 skipped" in lines
    assert any(line.startswith("over interval     1 of 3 batches (33.3%)") for line in lines)


# --- the command --------------------------------------------------------------------------


def test_report_prints_the_summary(tmp_path: Path) -> None:
    path = write(tmp_path, batch(0, records=100), batch(1, records=300))
    with path.open("a", encoding="utf-8") as out:
        out.write('{"batch_time_ms": 17322')  # truncated
    result = invoke(str(path))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["batches", "2"]
    assert "malformed lines   1 skipped" in lines
    assert "throughput        100.0 records/s" in lines  # 400 records over 4 s


def test_empty_file_exits_1(tmp_path: Path) -> None:
    path = write(tmp_path)
    result = invoke(str(path))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"no batches in {path}\n"


def test_only_malformed_lines_exits_1_and_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, '{"batch_time_ms": 1')
    result = invoke(str(path))
    assert result.exit_code == 1
    assert result.stderr == f"no batches in {path} (1 malformed line(s) skipped)\n"


@pytest.mark.parametrize("name", ["absent.jsonl", "."])
def test_unreadable_file_is_a_one_line_usage_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    result = invoke(str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"Error: {path}: ")
    assert "Traceback" not in result.output


# --- the plot -----------------------------------------------------------------------------


def floats(data: ArrayLike) -> list[float]:
    """A matplotlib line's x or y data as plain floats."""
    return [float(v) for v in np.asarray(data, dtype=float)]


def test_plot_writes_a_png_with_two_panels(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        batch(0, records=100),
        batch(1, records=300, processing_ms=None),
        batch(30, records=500),  # a restart: batch times jump
    )
    records, _ = read_metrics(path)
    png = tmp_path / "out.png"
    fig = plot(records, png)
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000
    assert len(fig.axes) == 2
    rate, delay = fig.axes
    x, y = floats(rate.lines[0].get_xdata()), floats(rate.lines[0].get_ydata())
    assert x[:2] == [0.0, 2.0] and x[-1] == 60.0
    assert math.isnan(x[2])  # the line is broken across the restart gap
    assert [y[0], y[1], y[3]] == [50.0, 150.0, 250.0]  # records per second
    processing = floats(delay.lines[0].get_ydata())
    assert processing[0] == 0.4 and math.isnan(processing[1])  # unknown is a gap, not 0
    labels = [line.get_label() for line in delay.lines]
    assert labels == ["processing", "scheduling delay", "total delay", "batch interval"]
    assert floats(delay.lines[3].get_ydata()) == [2.0, 2.0]  # horizontal, at the interval
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.png")]  # no temp


def test_report_plot_option_writes_the_png(tmp_path: Path) -> None:
    path = write(tmp_path, batch(0), batch(1))
    png = tmp_path / "metrics.png"
    result = invoke(str(path), "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert result.stderr == f"wrote {png}\n"
    assert result.stdout.startswith("batches")
    assert png.read_bytes()[:8] == PNG_SIGNATURE


def test_plot_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, batch(0))
    png = tmp_path / "no" / "such" / "dir.png"
    result = invoke(str(path), "--plot", str(png))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"Error: {png}: ") and len(result.stderr.splitlines()) == 1


def test_plot_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)  # None makes the import fail
    path = write(tmp_path, batch(0))
    png = tmp_path / "metrics.png"
    with pytest.raises(ConfigError, match=r"pip install 'streaming-app\[plot\]'"):
        plot(read_metrics(path)[0], png)
    result = invoke(str(path), "--plot", str(png))
    assert result.exit_code == 2
    assert result.stderr == f"Error: {PLOT_MISSING}\n"
    assert result.stdout == ""
    assert not png.exists()


def test_the_engines_that_wrote_the_file_are_named(tmp_path: Path) -> None:
    old = write(tmp_path, batch(0), batch(1))  # from before the field: the DStream engine's
    assert "engine            dstream" in format_summary(summarize(read_metrics(old)[0]), 0)
    both = write(tmp_path, batch(0, engine="dstream"), batch(1, engine="structured", batch_id=0))
    batches = read_metrics(both)[0]
    assert [b.batch_id for b in batches] == [None, 0]
    assert "engine            dstream, structured" in format_summary(summarize(batches), 0)
