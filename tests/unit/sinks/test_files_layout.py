"""The files sink's layout: names, pruning, and reading the newest complete totals back."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.errors import OutputError
from streaming_app.sinks.files_layout import (
    batch_of,
    format_total,
    format_totals,
    latest_totals_dir,
    read_totals,
    temp_name,
    to_prune,
    totals_name,
)


def make_batch(output: Path, name: str, parts: dict[str, str], complete: bool = True) -> Path:
    """A hand-made batch directory like Spark's saveAsTextFile leaves it."""
    batch = output / name
    batch.mkdir(parents=True)
    for part, text in parts.items():
        (batch / part).write_text(text, encoding="utf-8")
    if complete:
        (batch / "_SUCCESS").write_text("")
    return batch


@pytest.mark.parametrize("batch_ms", [0, 1, 1_763_805_601_000, 10**15])
def test_totals_name_round_trips_through_batch_of(batch_ms: int) -> None:
    assert totals_name(batch_ms).startswith("totals-")
    assert batch_of(totals_name(batch_ms)) == batch_ms


@pytest.mark.parametrize(
    "name",
    ["totals-", "totals-abc", "totals-12x", "xtotals-12", "_tmp-totals-12", "_SUCCESS", "part-0"],
)
def test_batch_of_other_names_is_none(name: str) -> None:
    assert batch_of(name) is None


def test_temp_name_is_not_a_totals_name() -> None:
    assert temp_name(5) != totals_name(5)
    assert batch_of(temp_name(5)) is None


def test_to_prune_keeps_the_newest_n_totals() -> None:
    names = [totals_name(b) for b in (300, 100, 1000, 200, 50)] + ["_SUCCESS", "notes.txt"]
    assert sorted(to_prune(names, 2, 1000)) == sorted(
        [totals_name(200), totals_name(100), totals_name(50)]
    )


def test_to_prune_compares_batch_times_as_numbers() -> None:
    # "totals-99" sorts after "totals-100" as text; by time it is the older one.
    assert to_prune([totals_name(99), totals_name(100)], 1, 100) == [totals_name(99)]


def test_to_prune_removes_nothing_when_under_the_limit() -> None:
    assert to_prune([totals_name(1), totals_name(2)], 10, 2) == []


def test_to_prune_removes_older_temp_dirs_but_not_the_current_or_newer_ones() -> None:
    names = [temp_name(100), temp_name(400), temp_name(500), temp_name(600), totals_name(500)]
    doomed = to_prune(names, 10, 500)
    assert sorted(doomed) == sorted([temp_name(100), temp_name(400)])


def test_to_prune_ignores_temp_like_names_without_a_batch_time() -> None:
    assert to_prune(["_tmp-totals-", "_tmp-totals-x1", "_tmp-totalsy"], 1, 10**13) == []


def test_read_totals_picks_the_newest_complete_batch(tmp_path: Path) -> None:
    make_batch(tmp_path, totals_name(99), {"part-00000": "old\t1\n"})
    make_batch(tmp_path, totals_name(100), {"part-00000": "b\t2\na\t5\n", "part-00001": "c\t7\n"})
    make_batch(tmp_path, totals_name(200), {"part-00000": "half\t1\n"}, complete=False)
    make_batch(tmp_path, temp_name(300), {"part-00000": "temp\t1\n"})
    assert read_totals(str(tmp_path)) == (100, {"a": 5, "b": 2, "c": 7})


def test_latest_totals_dir_returns_batch_and_path(tmp_path: Path) -> None:
    make_batch(tmp_path, totals_name(42), {})
    assert latest_totals_dir(str(tmp_path)) == (42, str(tmp_path / totals_name(42)))


def test_read_totals_ignores_files_that_are_not_parts(tmp_path: Path) -> None:
    parts = {"part-00000": "a\t1\n", ".part-00000.crc": "binary junk", "_SUCCESS": ""}
    make_batch(tmp_path, totals_name(7), parts)
    assert read_totals(str(tmp_path)) == (7, {"a": 1})


def test_read_totals_keeps_words_with_spaces_and_empty_parts(tmp_path: Path) -> None:
    make_batch(tmp_path, totals_name(7), {"part-00000": "", "part-00001": "new york\t3\n"})
    assert read_totals(str(tmp_path)) == (7, {"new york": 3})


@pytest.mark.parametrize("names", [[], [totals_name(5)], [temp_name(5)]])
def test_read_totals_without_a_complete_batch_is_empty(tmp_path: Path, names: list[str]) -> None:
    for name in names:
        make_batch(tmp_path, name, {"part-00000": "a\t1\n"}, complete=name.startswith("_tmp"))
    assert read_totals(str(tmp_path)) == (None, {})


@pytest.mark.parametrize(
    "line", ["a 1", "a\tx", "a\tNaN", "a\t", "\n", "a\tInfinity", "a\t²", "a\t1,5"]
)
def test_malformed_line_is_an_output_error(tmp_path: Path, line: str) -> None:
    make_batch(tmp_path, totals_name(3), {"part-00000": f"ok\t1\n{line}\n"})
    with pytest.raises(OutputError, match=r"part-00000:2: malformed line"):
        read_totals(str(tmp_path))


def test_missing_output_dir_is_an_output_error(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        read_totals(str(tmp_path / "absent"))


def test_output_dir_that_is_a_file_is_an_output_error(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(OutputError, match="is not a directory"):
        read_totals(str(path))


def test_format_total() -> None:
    assert format_total(("word", 12)) == "word\t12"


def test_format_totals_sorts_by_word() -> None:
    totals = {"b": 1, "a": 20, "B": 3, "ab": 2}
    assert format_totals(totals) == ["B\t3", "a\t20", "ab\t2", "b\t1"]


def test_format_totals_of_nothing_is_empty() -> None:
    assert format_totals({}) == []


def test_counts_and_exact_sums_read_back_as_written(tmp_path: Path) -> None:
    from decimal import Decimal

    from streaming_app.sinks.files_layout import format_total, parse_value, read_totals_dir

    values = {"a": 3, "b": -2, "c": Decimal("10.50"), "d": Decimal("-0.01"), "e": Decimal("1E+3")}
    part = tmp_path / "part-00000"
    part.write_text("".join(format_total(pair) + "\n" for pair in values.items()))
    assert "e\t1000\n" in part.read_text()  # no exponent notation
    assert read_totals_dir(str(tmp_path)) == values
    assert parse_value("10.50") == Decimal("10.50") and str(parse_value("10.50")) == "10.50"
