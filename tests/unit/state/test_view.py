"""StateView.lines' elements, without Spark: what saveAsTextFile gets for each bucket."""

from __future__ import annotations

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
