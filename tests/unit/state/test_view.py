"""StateView.lines' elements, without Spark: what saveAsTextFile gets for each bucket."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial

import pytest

from streaming_app.jobs.text import update_count
from streaming_app.sinks.files_layout import format_total
from streaming_app.state import view
from streaming_app.state.buckets import new_bucket


@pytest.mark.parametrize("keys", [0, 1, 5, 6, 17])
def test_a_bucket_becomes_few_joined_elements_with_every_line_once(
    keys: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view, "LINES_PER_ELEMENT", 5)
    totals = {f"w{i}": i + 1 for i in range(keys)}
    elements = list(view._bucket_lines(format_total, (3, new_bucket(totals, update_count, 0))))
    assert len(elements) == -(-keys // 5)  # none empty: an empty one would be a blank line
    assert all(0 < element.count("\n") + 1 <= 5 for element in elements)
    written = "".join(element + "\n" for element in elements)  # what saveAsTextFile writes
    assert written == "".join(format_total(pair) + "\n" for pair in totals.items())


def test_the_writing_task_writes_every_line_and_brings_the_same_digest() -> None:
    from streaming_app.jobs.text import add_counts
    from streaming_app.state.buckets import merge_bucket

    before = {f"w{i}": i + 1 for i in range(30)}
    state = new_bucket(before, update_count, 3)
    records = [
        (1, merge_bucket([{"w1": 5, "new": 2}], state, update_count, 3)),
        (2, new_bucket({"x": 9}, update_count, 3)),
        (3, merge_bucket([{"w29": 1}], new_bucket({"w29": 4}, update_count, 3), update_count, 3)),
    ]
    written: list[str] = []

    def write(index: int, lines: Iterable[str]) -> Iterator[int]:
        assert index == 7
        written.extend(lines)
        yield len(written)

    lines_of = partial(view._changed_lines, format_total)
    ((count, digest),) = view._write_and_digest(add_counts, True, lines_of, write, 7, iter(records))
    assert count == len(written) == 2  # one element per bucket that changed
    assert sorted("\n".join(written).split("\n")) == sorted(
        format_total(p) for _, b in records if b.changed for p in b.changed.items()
    )
    assert digest == next(view._partition_digest(add_counts, True, records))
    assert digest[0] == 3 and digest[2] == 31 + 1 + 1  # changed totals, keys
