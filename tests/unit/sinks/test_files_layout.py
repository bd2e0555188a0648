"""The files sink's layout: names, chain markers, pruning, and reading the totals back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from streaming_app.errors import OutputError
from streaming_app.sinks.files_layout import (
    CHAIN_MARKER,
    DELTA,
    LINK_KINDS,
    TOTALS,
    WINDOW,
    Link,
    batch_of,
    chain_break,
    format_link,
    format_total,
    format_totals,
    latest_totals_dir,
    parse_link,
    read_totals,
    read_totals_dir,
    temp_name,
    to_prune,
    to_prune_chain,
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


# --- the chain of bases and deltas ----------------------------------------------------------

CONTEXT = "ctx-a"


def make_link(
    output: Path,
    name: str,
    parts: dict[str, str],
    previous: int,
    context: str = CONTEXT,
    complete: bool = True,
) -> Path:
    """A base or delta as the files sink writes it: parts, `_SUCCESS` and its chain marker."""
    batch = make_batch(output, name, parts, complete)
    kind = LINK_KINDS[DELTA if DELTA in name else TOTALS]
    (batch / CHAIN_MARKER).write_bytes(format_link(Link(context, previous, kind)))
    return batch


def make_chain(output: Path, start: int = 1000, context: str = CONTEXT) -> None:
    """A base at `start` and deltas every 1000 ms after it, each adding to the totals."""
    make_link(output, totals_name(start), {"part-00000": "a\t1\n", "part-00001": "b\t2\n"}, 0)
    make_link(output, totals_name(start + 1000, DELTA), {"part-00000": "a\t3\n"}, start, context)
    make_link(output, totals_name(start + 2000, DELTA), {"part-00000": ""}, start + 1000, context)
    make_link(
        output, totals_name(start + 3000, DELTA), {"part-00000": "c\t1\nb\t5\n"}, start + 2000
    )


def test_link_round_trips_and_anything_else_is_none() -> None:
    link = Link(CONTEXT, 1000, "delta")
    assert parse_link(format_link(link)) == link
    assert json.loads(format_link(link)) == {"context": CONTEXT, "previous": 1000, "kind": "delta"}
    for bad in [b"", b"{", b"[]", b'{"context": "c", "previous": 1}', b"\xff",
                b'{"context": "c", "previous": "1", "kind": "delta"}',
                b'{"context": 1, "previous": 1, "kind": "delta"}',
                b'{"context": "c", "previous": 1, "kind": "totals"}',
                b'{"context": "c", "previous": true, "kind": "base"}']:  # fmt: skip
        assert parse_link(bad) is None, bad


def test_a_base_and_its_chain_of_deltas_read_as_the_totals_of_the_last_delta(
    tmp_path: Path,
) -> None:
    make_chain(tmp_path)
    assert read_totals(str(tmp_path)) == (4000, {"a": 3, "b": 5, "c": 1})
    # The newest base alone is the base, not the totals.
    assert latest_totals_dir(str(tmp_path)) == (1000, str(tmp_path / totals_name(1000)))


def test_a_reader_that_keeps_what_it_parsed_reads_the_same_and_keeps_it_unchanged(
    tmp_path: Path,
) -> None:
    make_chain(tmp_path)
    kept: dict[str, dict[str, Any]] = {}

    def read_dir(path: str) -> dict[str, Any]:
        return kept.setdefault(path, read_totals_dir(path))

    assert read_totals(str(tmp_path), read_dir=read_dir) == (4000, {"a": 3, "b": 5, "c": 1})
    assert kept[str(tmp_path / totals_name(1000))] == {"a": 1, "b": 2}  # the base as parsed
    assert read_totals(str(tmp_path), read_dir=read_dir) == (4000, {"a": 3, "b": 5, "c": 1})


def test_the_newest_base_is_read_with_the_deltas_after_it_only(tmp_path: Path) -> None:
    make_chain(tmp_path)
    make_link(tmp_path, totals_name(4000), {"part-00000": "a\t3\nb\t5\nc\t1\n"}, 3000)
    make_link(tmp_path, totals_name(5000, DELTA), {"part-00000": "d\t1\n"}, 4000)
    assert read_totals(str(tmp_path)) == (5000, {"a": 3, "b": 5, "c": 1, "d": 1})


@pytest.mark.parametrize(
    "gap",
    [
        "missing",  # a delta in the middle is gone
        "incomplete",  # ... or has no _SUCCESS
        "no marker",  # ... or no chain marker
        "other previous",  # ... or follows another batch
        "other context",  # ... or another context's chain
    ],
)
def test_the_chain_stops_at_the_first_break(tmp_path: Path, gap: str) -> None:
    make_link(tmp_path, totals_name(1000), {"part-00000": "a\t1\n"}, 0)
    make_link(tmp_path, totals_name(2000, DELTA), {"part-00000": "a\t2\n"}, 1000)
    if gap != "missing":
        make_link(
            tmp_path,
            totals_name(3000, DELTA),
            {"part-00000": "a\t3\n"},
            1500 if gap == "other previous" else 2000,
            "ctx-b" if gap == "other context" else CONTEXT,
            complete=gap != "incomplete",
        )
        if gap == "no marker":
            (tmp_path / totals_name(3000, DELTA) / CHAIN_MARKER).unlink()
    # Whatever follows the break is not read, even if it chains on from there.
    make_link(tmp_path, totals_name(4000, DELTA), {"part-00000": "a\t4\n"}, 3000)
    assert read_totals(str(tmp_path)) == (2000, {"a": 2})


def test_a_delta_of_another_context_is_not_read(tmp_path: Path) -> None:
    make_link(tmp_path, totals_name(1000), {"part-00000": "a\t1\n"}, 0)
    make_link(tmp_path, totals_name(2000, DELTA), {"part-00000": "a\t9\n"}, 1000, "ctx-b")
    assert read_totals(str(tmp_path)) == (1000, {"a": 1})


def test_an_old_output_dir_without_markers_reads_as_before(tmp_path: Path) -> None:
    # 0.2.0 and 0.3.0 wrote every total every batch, without a chain marker.
    make_batch(tmp_path, totals_name(1000), {"part-00000": "a\t1\n"})
    make_batch(tmp_path, totals_name(2000), {"part-00000": "a\t2\n", "part-00001": "b\t1\n"})
    assert read_totals(str(tmp_path)) == (2000, {"a": 2, "b": 1})
    # Nothing chains onto a base of an unknown context, even a delta that says it does.
    make_link(tmp_path, totals_name(3000, DELTA), {"part-00000": "a\t3\n"}, 2000)
    assert read_totals(str(tmp_path)) == (2000, {"a": 2, "b": 1})


def test_an_upgraded_output_dir_reads_the_new_chain_after_the_old_bases(tmp_path: Path) -> None:
    make_batch(tmp_path, totals_name(1000), {"part-00000": "a\t1\n"})
    make_batch(tmp_path, totals_name(2000), {"part-00000": "a\t2\n"})
    # The new version's first batch is a base (of every total), then deltas follow.
    make_chain(tmp_path, start=9000)
    assert read_totals(str(tmp_path)) == (12000, {"a": 3, "b": 5, "c": 1})


def test_temp_dirs_and_other_entries_are_ignored(tmp_path: Path) -> None:
    make_chain(tmp_path)
    make_link(tmp_path, temp_name(5000, DELTA), {"part-00000": "a\t99\n"}, 4000)
    make_link(tmp_path, temp_name(5000), {"part-00000": "a\t99\n"}, 4000)
    make_link(tmp_path, "_replaced-" + totals_name(4000, DELTA), {"part-00000": "a\t99\n"}, 3000)
    make_batch(tmp_path, totals_name(6000, WINDOW), {"part-00000": "a\t99\n"})
    (tmp_path / "notes.txt").write_text("x")
    assert read_totals(str(tmp_path)) == (4000, {"a": 3, "b": 5, "c": 1})


def test_a_directory_pruned_while_it_is_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streaming_app.sinks import files_layout

    make_chain(tmp_path)
    real, calls = files_layout.read_totals_dir, []

    def racing(path: str) -> dict[str, object]:
        calls.append(path)
        if len(calls) == 2:  # the first delta: the app prunes it under the reader
            raise FileNotFoundError(2, "No such file or directory", path)
        return real(path)

    monkeypatch.setattr(files_layout, "read_totals_dir", racing)
    assert read_totals(str(tmp_path)) == (4000, {"a": 3, "b": 5, "c": 1})
    assert len(calls) == 2 + 4  # read again, from the base


def test_a_directory_that_keeps_disappearing_is_an_output_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streaming_app.sinks import files_layout

    make_chain(tmp_path)

    def gone(path: str) -> dict[str, object]:
        raise FileNotFoundError(2, "No such file or directory", path)

    monkeypatch.setattr(files_layout, "read_totals_dir", gone)
    with pytest.raises(OutputError, match="keeps disappearing"):
        read_totals(str(tmp_path), attempts=2)


def test_the_window_is_read_whole_and_not_as_a_chain(tmp_path: Path) -> None:
    make_batch(tmp_path, totals_name(1000, WINDOW), {"part-00000": "a\t1\n"})
    make_batch(tmp_path, totals_name(2000, WINDOW), {"part-00000": "b\t1\n"})
    make_chain(tmp_path)
    assert read_totals(str(tmp_path), kind=WINDOW) == (2000, {"b": 1})


@pytest.mark.parametrize(
    ("previous", "reason"),
    [
        ([Link(CONTEXT, 1000, "delta")], None),
        ([Link(CONTEXT, 1000, "base")], None),
        ([Link("ctx-b", 1000, "delta"), Link(CONTEXT, 1000, "base")], None),
        ([], "no output of the previous batch"),
        ([None], "has no chain marker (written before 0.4.0)"),
        ([Link("ctx-b", 1000, "base")], "of another context (ctx-b)"),
    ],
)
def test_chain_break_says_why_a_delta_cannot_follow(
    previous: list[Link | None], reason: str | None
) -> None:
    found = chain_break(CONTEXT, previous)
    assert found == reason if reason is None else (found is not None and reason in found)


def test_to_prune_chain_keeps_the_newest_bases_and_the_deltas_after_the_oldest_kept() -> None:
    bases = [totals_name(b) for b in (0, 4000, 8000, 12000)]
    deltas = [totals_name(b, DELTA) for b in range(1000, 15000, 1000) if b % 4000]
    temps = [temp_name(14000, DELTA), temp_name(15000, DELTA), temp_name(13000)]
    names = [*bases, *deltas, *temps, totals_name(9000, WINDOW), "notes.txt"]
    doomed = to_prune_chain(names, 2, 15000)
    assert sorted(doomed) == sorted(
        [totals_name(0), totals_name(4000), temp_name(14000, DELTA), temp_name(13000)]
        + [totals_name(b, DELTA) for b in (1000, 2000, 3000, 5000, 6000, 7000)]
    )
    assert to_prune_chain(names, 10, 15000) == [temp_name(14000, DELTA), temp_name(13000)]


def test_to_prune_chain_leaves_what_a_replay_has_not_reached_yet() -> None:
    # Replaying 5000 after a crash: the run before wrote up to 9000 (a base at 8000).
    names = [totals_name(b) for b in (0, 4000, 8000)]
    names += [totals_name(b, DELTA) for b in (1000, 2000, 3000, 5000, 6000, 7000, 9000)]
    doomed = to_prune_chain(names, 1, 5000)
    assert sorted(doomed) == sorted(
        [totals_name(0)] + [totals_name(b, DELTA) for b in (1000, 2000, 3000)]
    )


def test_pruning_after_every_batch_keeps_the_directory_bounded(tmp_path: Path) -> None:
    keep, base_every = 2, 4
    names: set[str] = set()
    for batch in range(1, 200):
        kind = TOTALS if batch % base_every == 0 or batch == 1 else DELTA
        names.add(totals_name(batch * 1000, kind))
        names -= set(to_prune_chain(names, keep, batch * 1000))
        assert len(names) <= keep * base_every + base_every
    assert sum(batch_of(n) is not None for n in names) == keep


def test_the_documented_recipe_reads_what_read_totals_reads(tmp_path: Path) -> None:
    # docs/sources-and-sinks.md shows how to read the output without streaming_app.
    doc = (Path(__file__).parents[3] / "docs" / "sources-and-sinks.md").read_text("utf-8")
    code = next(block for block in re.findall(r"```python\n(.*?)```", doc, re.S) if "def " in block)
    recipe: dict[str, Any] = {}
    exec(compile(code, "docs/sources-and-sinks.md", "exec"), recipe)
    make_batch(tmp_path, totals_name(500), {"part-00000": "old\t1\n"})
    make_chain(tmp_path)
    make_link(tmp_path, totals_name(6000, DELTA), {"part-00000": "a\t9\n"}, 5000)
    batch_ms, totals = read_totals(str(tmp_path))
    assert recipe["read_output"](str(tmp_path)) == (
        batch_ms,
        {k: str(v) for k, v in totals.items()},
    )
