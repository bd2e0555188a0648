"""The benchmark's rules that decide the headline figures (pure functions, no runs)."""

from __future__ import annotations

from typing import Any

from bench.checkpoint import checkpoint_report, within_run, writes_checkpoint
from bench.compare import keys_table, sustained, table
from bench.rates import interleaved
from bench.throughput import size_keeps_up, sustained_lines


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
