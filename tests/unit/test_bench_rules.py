"""The benchmark's rules that decide the headline figures (pure functions, no runs)."""

from __future__ import annotations

from typing import Any

from bench.compare import sustained, table
from bench.run import size_keeps_up, sustained_lines


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
