"""The state update of transformWithState, without Spark: exact totals kept as text."""

from __future__ import annotations

from decimal import Decimal

from streaming_app.structured.processor import parse_number, updated_total


def test_counts_are_added_to_the_running_total() -> None:
    assert updated_total("wordcount", ["2", "3"], None) == "5"
    assert updated_total("wordcount", ["1"], "41") == "42"
    assert updated_total("wordcount", [], None) is None
    assert updated_total("wordcount", [], "7") == "7"


def test_sums_stay_exact_beyond_a_double() -> None:
    big = "123456789012345678901234567890.000000000000000000000000000001"
    assert updated_total("keyed-sum", [big, "0.1"], "0.2") == (
        "123456789012345678901234567890.300000000000000000000000000001"
    )
    assert updated_total("keyed-sum", ["0.1", "0.2"], None) == "0.3"


def test_numbers_are_parsed_as_the_job_keeps_them() -> None:
    assert parse_number("wordcount", "12") == 12
    assert parse_number("keyed-sum", "1.50") == Decimal("1.50")
