"""The files source's lines per batch: counted per partition by the jobs that read them."""

from __future__ import annotations

import pytest

from streaming_app.sources import line_counts
from streaming_app.sources.line_counts import LineCountsParam, _count, batch_lines


class _Accumulator:
    def __init__(self) -> None:
        self.value: dict[int, dict[int, int]] = {}

    def add(self, update: dict[int, dict[int, int]]) -> None:
        LineCountsParam().addInPlace(self.value, update)


def test_a_partition_passes_its_lines_on_and_then_adds_their_number() -> None:
    counts = _Accumulator()
    read = _count(2000, counts, 1, iter(["a b", "c", ""]))
    assert next(read) == "a b"
    assert counts.value == {}  # not before the partition is read to the end
    assert list(read) == ["c", ""]
    assert counts.value == {2000: {1: 3}}


def test_a_partition_read_twice_counts_once_and_partitions_add_up() -> None:
    counts = _Accumulator()
    for index, lines in [(0, ["x"] * 4), (1, ["y"] * 3), (0, ["x"] * 4)]:
        list(_count(2000, counts, index, iter(lines)))
    list(_count(4000, counts, 0, iter(["z"])))
    assert counts.value == {2000: {0: 4, 1: 3}, 4000: {0: 1}}


def test_a_batch_is_taken_once_and_older_ones_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _Accumulator()
    counts.value = {1000: {0: 9}, 2000: {0: 4, 1: 3}, 4000: {0: 1}}
    monkeypatch.setattr(line_counts, "_COUNTS", counts)
    assert batch_lines(2000) == 7
    assert counts.value == {4000: {0: 1}}
    assert batch_lines(2000) == 0
    assert batch_lines(4000) == 1


def test_no_counts_yet_is_no_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(line_counts, "_COUNTS", None)
    assert batch_lines(2000) == 0
