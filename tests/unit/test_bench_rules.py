"""The benchmark's rules that decide the headline figures (pure functions, no runs)."""

from __future__ import annotations

from typing import Any

from bench.compare import keys_table, sustained, table
from bench.harness.memory import (
    HEAP_USED,
    Sample,
    batch_window,
    course,
    peak_during,
    slope_per_hour,
    trend,
)
from bench.harness.periodic import aligned, kinds, periodic_figures, writes_checkpoint
from bench.harness.rates import idle_batches, interleaved
from bench.state.memory_run import warm_until
from bench.state.state_cost import aligned_or_not, cost_figures, loaded
from bench.throughput.checkpoint import checkpoint_report, within_run
from bench.throughput.throughput import size_keeps_up, sustained_lines
from streaming_app.common.metrics_record import BatchMetrics


def _figures(kept: int, runs: int = 3, processing: float = 1.0) -> dict[str, Any]:
    return {
        "runs_kept_up": kept,
        "runs": runs,
        "processing_s": processing,
        "runs_processing_s": [processing] * runs,
    }


def test_a_size_keeps_up_when_most_of_its_runs_do() -> None:
    assert size_keeps_up(_figures(2)) and size_keeps_up(_figures(3))
    assert not size_keeps_up(_figures(1)) and not size_keeps_up(_figures(1, runs=2))


def test_the_sustained_size_stops_below_the_first_size_that_does_not_keep_up() -> None:
    def tried(*flags: bool) -> list[dict[str, Any]]:
        sizes = (20_000, 140_000, 200_000, 230_000, 260_000)
        return [{"batch_lines": s, "keeps_up": f} for s, f in zip(sizes, flags, strict=True)]

    # 260,000 kept up after 230,000 did not (noise): the rate is 200,000's.
    assert sustained_lines(tried(True, True, True, False, True)) == 200_000
    assert sustained_lines(tried(True, True, True, True, True)) == 260_000
    assert sustained_lines(tried(False, True, True, True, True)) == 0
    # Whatever order the sizes come in.
    assert sustained_lines(list(reversed(tried(True, True, False, True, True)))) == 140_000


def test_compare_reports_each_side_by_the_same_rule() -> None:
    def row(lines: int, before: tuple[int, float], after: tuple[int, float]) -> dict[str, Any]:
        return {
            "batch_lines": lines,
            "before": _figures(before[0], processing=before[1]),
            "after": _figures(after[0], processing=after[1]),
        }

    rows = [row(20_000, (3, 1.0), (3, 0.6)), row(140_000, (1, 2.1), (3, 1.5)),
            row(230_000, (0, 2.5), (2, 1.9))]  # fmt: skip
    assert sustained(rows, "before") == 100_000  # 20,000 lines of 10 words per 2 s
    assert sustained(rows, "after") == 1_150_000
    text = table("abc123", {"rows": rows, "baseline_words_per_s": 1_000_000.0})
    assert "| 140,000 | 2.1 s |" in text and "| 0.71 |" in text  # after / before: 1.5 / 2.1
    assert "| after, sustained (of the sizes tried) | 1,150,000 | 1.15 |" in text
    assert "| before, sustained (of the sizes tried) | 100,000 | 0.10 |" in text


def test_the_batches_that_write_a_checkpoint_are_every_nth_from_the_first() -> None:
    # Spark's rule, as the log of a run with a checkpoint every 5 batches showed it: the
    # 5th, 10th and 15th batch (of 2 s) from the first wrote one.
    first = 1_795_420_092_000
    wrote = [n for n in range(1, 17) if writes_checkpoint(first + (n - 1) * 2000, first, 2000, 5)]
    assert wrote == [5, 10, 15]
    assert all(writes_checkpoint(first + k * 2000, first, 2000, 1) for k in range(4))
    assert not any(writes_checkpoint(first + k * 2000, first, 2000, 1000) for k in range(50))


def test_within_a_run_the_extra_of_a_checkpoint_is_spread_over_its_interval() -> None:
    batches = [(False, 0.5), (False, 0.6), (True, 0.8), (False, 0.5), (False, 0.55), (True, 0.7)]
    figures = within_run(batches, 3)
    assert figures["written_s"] == 0.75 and figures["others_s"] == 0.525
    assert figures["extra_s"] == 0.225
    # Three batches take 3 * 0.525 + 0.225 s where they would take 3 * 0.525 s: 12.5% lost.
    assert figures["within_loss_pct"] == 12.5
    assert within_run([(False, 0.6), (True, 0.5)], 2)["within_loss_pct"] < 0  # noise shows
    # No batch of one kind: nothing to compare within the run.
    assert set(within_run([(True, 0.5)] * 3, 1).values()) == {None}
    assert set(within_run([(False, 0.5)] * 3, 1000).values()) == {None}


def test_interleaved_takes_the_median_of_the_runs_that_know_a_figure() -> None:
    runs = iter([{"processing_s": 1.0, "first_scheduling_delay_s": 0, "last_scheduling_delay_s": 0,
                  "extra_s": 0.2, "within_loss_pct": None},
                 {"processing_s": 3.0, "first_scheduling_delay_s": 0, "last_scheduling_delay_s": 0,
                  "extra_s": 0.4, "within_loss_pct": 5.0}])  # fmt: skip
    merged = interleaved(2, {"only": lambda _suffix: next(runs)})["only"]
    assert merged["processing_s"] == 2.0 and merged["extra_s"] == 0.3
    assert merged["within_loss_pct"] == 5.0
    assert merged["runs"] == 2 and merged["runs_processing_s"] == [1.0, 3.0]


def test_the_checkpoint_table_is_in_interval_order_against_the_largest() -> None:
    def figures(within: float | None) -> dict[str, Any]:
        return {**_figures(3), "mean_processing_s": 0.7, "loss_pct": 1.0, "written_s": None,
                "others_s": None, "extra_s": None, "within_loss_pct": within,
                "runs_within_loss_pct": [within] * 3}  # fmt: skip

    # results.json sorts its keys as text: "1", "10", "1000", "5".
    cost = {"1": figures(None), "10": figures(2.8), "1000": figures(None), "5": figures(4.4)}
    text = "\n".join(checkpoint_report(cost, 600_000))
    assert text.index("| 5 batches |") < text.index("| 10 batches |") < text.index("| 1000 b")
    assert "against an interval of 1000 batches" in text
    assert "| 4.4% (4.4%, 4.4%, 4.4%) |" in text and "| — |" in text


def test_compare_on_a_large_state_reports_both_sides_and_their_ratio() -> None:
    found = {
        "before": _figures(2, runs=2, processing=2.0),
        "after": _figures(2, runs=2, processing=1.5),
    }
    found["before"]["words_per_s"], found["after"]["words_per_s"] = 100_000, 133_333
    text = keys_table("abc123", 1_000_000, found)
    assert "| before (abc123) | 2.0 s | 2.0 s, 2.0 s | 100,000 |" in text
    assert "| after | 1.5 s | 1.5 s, 1.5 s | 133,333 |" in text
    assert "| after / before | 0.75 | | |" in text


def test_interleaved_keeps_every_runs_value_of_the_fields_asked_for() -> None:
    runs = iter([{"processing_s": 1.0, "first_scheduling_delay_s": 0, "last_scheduling_delay_s": 0,
                  "within_loss_pct": None},
                 {"processing_s": 3.0, "first_scheduling_delay_s": 0, "last_scheduling_delay_s": 0,
                  "within_loss_pct": 5.0}])  # fmt: skip
    merged = interleaved(
        2, {"only": lambda _suffix: next(runs)}, each=("processing_s", "within_loss_pct")
    )["only"]
    assert merged["runs_processing_s"] == [1.0, 3.0]
    assert merged["runs_within_loss_pct"] == [None, 5.0] and merged["within_loss_pct"] == 5.0


def _batch(n: int, records: int | None, processing_ms: int = 500) -> BatchMetrics:
    """The nth batch (from 1) of a run whose first batch time is FIRST, 2 s apart."""
    time_ms = FIRST + (n - 1) * 2000
    return BatchMetrics(time_ms, 2000, records, processing_ms, 0, processing_ms, 0, time_ms + 900)


FIRST = 1_795_420_092_000  # a multiple of 2 s but not of 20 s: aligned batches are the 5th, 15th


def test_idle_batches_are_those_that_read_nothing_once_the_input_was_read() -> None:
    batches = [_batch(1, 0), _batch(2, 400), _batch(3, 0), _batch(4, 600), _batch(5, 0),
               _batch(6, None), _batch(7, 0)]  # fmt: skip
    # The 1st read nothing before any input and the 3rd before all 1000 lines were read;
    # a batch of unknown records is not idle.
    assert [b.batch_time_ms for b in idle_batches(batches, 1000)] == [FIRST + 8000, FIRST + 12000]
    assert len(idle_batches(batches, 400)) == 3
    # The state is loaded once the lines that carry every key were read.
    assert [b.records for b in loaded(batches, 400)] == [0, 600, 0, None, 0]


def test_aligned_batches_fall_on_multiples_of_the_checkpoint_interval() -> None:
    # The snapshot writer's rule (and the files sink's base): batch times that are a
    # multiple of 10 batches of 2 s, whatever the run's first batch.
    wrote = [n for n in range(1, 31) if aligned(FIRST + (n - 1) * 2000, 2000, 10)]
    assert wrote == [5, 15, 25]
    # Spark's checkpoint counts from the run's first batch instead: the 10th, 20th, 30th.
    both = [kinds(_batch(n, 1), FIRST, 10) for n in range(1, 31)]
    assert [n for n, (_, spark) in enumerate(both, 1) if spark] == [10, 20, 30]


def test_periodic_figures_tell_the_batches_that_write_from_the_plain_ones() -> None:
    batches = [_batch(n, 400, 500 + (400 if n in (5, 15) else 0) + (300 if n in (10, 20) else 0))
               for n in range(3, 21)]  # fmt: skip
    figures = periodic_figures(batches, FIRST, 10, "busy_")
    assert figures["busy_plain_s"] == 0.5 and figures["busy_aligned_s"] == 0.9
    assert figures["busy_checkpoint_s"] == 0.8 and figures["busy_max_s"] == 0.9
    assert figures["busy_median_s"] == 0.5 and figures["busy_batches"] == 18
    none = periodic_figures([_batch(3, 0)], FIRST, 10, "idle_")
    assert none["idle_aligned_s"] is None and none["idle_checkpoint_s"] is None
    assert periodic_figures([], FIRST, 10, "")["median_s"] is None


def test_the_cost_run_reports_busy_and_idle_batches_apart() -> None:
    # 2 loading batches, 4 busy ones, then idle ones; every 2 batches a checkpoint.
    batches = [_batch(n, 400 if n <= 6 else 0, 1000 if n <= 6 else 300) for n in range(1, 11)]
    figures = cost_figures(2400, 2)(batches, batches[2:5])
    assert figures["busy_median_s"] == 1.0 and figures["busy_batches"] == 3
    assert figures["idle_median_s"] == 0.3 and figures["idle_batches"] == 4
    split = aligned_or_not(800, 2)(batches)
    # After the 800 loading lines: batches 3 to 10; FIRST is aligned to 4 s at odd batches.
    assert len(split["aligned"]) + len(split["others"]) == 8
    assert all(b.batch_time_ms % 4000 == 0 for b in split["aligned"])


def test_the_slope_of_memory_is_per_hour_and_the_trend_starts_after_the_warm_up() -> None:
    assert slope_per_hour([(0.0, 100.0), (1800.0, 110.0), (3600.0, 120.0)]) == 20.0
    assert slope_per_hour([(5.0, 100.0)]) is None
    assert slope_per_hour([(5.0, 100.0), (5.0, 200.0)]) is None

    def sample(at: float, driver_mib: float) -> Sample:
        return Sample(at, int(driver_mib * 1024), 0, 0, 2)

    # Growth while warming up, then flat: only the flat part counts.
    samples = [sample(t, 100 + t / 10) for t in range(0, 100, 10)]
    samples += [sample(t, 200) for t in range(100, 3700, 100)]
    flat = trend(samples, "driver_kb", since=100)
    assert flat == {"start_mib": 200, "end_mib": 200, "peak_mib": 200, "slope_mib_h": 0.0,
                    "late_slope_mib_h": 0.0}  # fmt: skip
    leaking = trend([sample(t, 100 + t / 360) for t in range(0, 3601, 60)], "driver_kb", 0)
    assert leaking["slope_mib_h"] == leaking["late_slope_mib_h"] == 10.0
    assert leaking["peak_mib"] == leaking["end_mib"] == 110
    assert set(trend(samples, "driver_kb", since=10_000).values()) == {None}


def test_the_memory_of_some_batches_is_the_largest_sample_while_they_ran() -> None:
    batch = BatchMetrics(FIRST, 2000, 0, 1_500_000, 0, 0, 0, 10_000_000)  # ran 8500 to 10000 s
    assert batch_window(batch) == (8499.75, 10000.25)  # widened by a sampling interval
    mib = 1024
    samples = [
        Sample(8000.0, 9 * mib, 50 * mib, 0, 1),
        Sample(9000.0, 300 * mib, 60 * mib, 7, 1),
        Sample(9999.0, 200 * mib, 70 * mib, 0, 1),
        Sample(10_500.0, 999 * mib, 0, 0, 1),
    ]
    # The 4th sample is after the batch; workers' 7 kB round to 0 MiB.
    assert peak_during(samples, [batch_window(batch)]) == {
        "driver_mib": 300, "jvm_mib": 70, "workers_mib": 0
    }  # fmt: skip
    assert set(peak_during(samples, [(0.0, 1.0)]).values()) == {None}


def test_the_long_run_is_warm_once_the_keys_are_loaded_and_the_warm_up_is_over() -> None:
    batches = [_batch(n, 400) for n in range(1, 6)]  # completed 0.9 s after their times
    started = FIRST / 1000 - 10
    # The keys (1000 lines) are read by the 3rd batch; the warm-up is over later still.
    assert warm_until(batches, 1000, started, 0) == (FIRST + 4000 + 900) / 1000
    assert warm_until(batches, 1000, started, 60) == started + 60
    assert warm_until(batches, 10_000, started, 0) == float("inf")


def test_the_used_heap_is_read_from_jcmds_heap_info() -> None:
    info = (
        "12345:\n garbage-first heap   total 262144K, used 52224K [0x00000000c0000000, "
        "0x0000000100000000)\n  region size 1024K, 45 young (46080K), 2 survivors (2048K)\n"
        " Metaspace       used 68000K, committed 68736K, reserved 1114112K\n"
    )
    found = HEAP_USED.search(info)
    assert found is not None and found.group(1) == "52224"  # the heap's, not Metaspace's


def test_a_course_of_points_leaves_out_those_before_the_warm_up() -> None:
    points = [(0.0, 999 * 1024), (10.0, 100 * 1024), (3610.0, 110 * 1024)]
    found = course(points, since=5.0)
    assert found["start_mib"] == 100 and found["end_mib"] == 110 and found["peak_mib"] == 110
    assert found["slope_mib_h"] == 10.0


def test_the_steady_batches_skip_the_warm_up_or_the_loading_and_the_last() -> None:
    from bench.harness.rates import steady_batches

    busy = ["a", "b", "c", "d", "e"]
    assert steady_batches(busy, [10] * 5, 0) == ["c", "d"]  # two warm-up, the last partial
    # After those that read the first 20 lines (a, b), and without the last.
    assert steady_batches(busy, [10] * 5, 20) == ["c", "d"]
    assert steady_batches(busy, [10] * 5, 30) == ["d"]
    assert steady_batches(["a", "b"], [10, 10], 0) == ["a", "b"]  # too few: all of them


def test_batch_figures_are_medians_and_means_of_the_steady_batches() -> None:
    from bench.harness.rates import batch_figures

    found = batch_figures([(1000, 1.0), (1000, 2.0), (2000, 1.0)])
    assert found == {
        "batches": 3, "processing_s": 1.0,
        "words_per_s": 10_000,  # median of 10,000, 5,000 and 20,000 words/s
        "mean_words_per_s": 10_000, "mean_processing_s": 1.333,
    }  # fmt: skip


def test_interleaved_can_start_each_round_with_the_next_measurement() -> None:
    order: list[str] = []

    def run(key: str) -> Any:
        def measure(suffix: str) -> dict[str, Any]:
            order.append(f"{key}{suffix}")
            return {"processing_s": 1.0}

        return measure

    interleaved(3, {k: run(k) for k in "abc"}, rotate=True)
    assert order == ["ar1", "br1", "cr1", "br2", "cr2", "ar2", "cr3", "ar3", "br3"]
