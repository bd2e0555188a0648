"""The structured state's values and layout without Spark: exact decimals, never rounded."""

from __future__ import annotations

from decimal import Decimal

import pytest

from streaming_app.structured.state_layout import exact, fits, state_layout, value_type


@pytest.mark.parametrize(
    ("text", "scale", "held"),
    [
        ("123456789012345678.000000000001", 12, True),  # 18 + 12 digits
        ("0.1", 0, False),  # would round
        ("0.0000000000001", 12, False),  # a 13th fraction digit
        ("1e25", 12, True),  # 26 integer digits: the most decimal(38,12) holds
        ("1e26", 12, False),
        ("-99999999999999999999999999.999999999999", 12, True),
        ("12.5000", 1, True),  # trailing zeros are not digits lost
        ("0", 30, True),
        ("NaN", 12, False),
        ("Infinity", 12, False),
    ],
)
def test_a_sum_is_held_only_if_exact_in_decimal_38(text: str, scale: int, held: bool) -> None:
    assert fits(Decimal(text), scale) is held


def test_totals_come_back_as_the_dstream_engine_keeps_them() -> None:
    assert exact(Decimal("100.600000000000")) == Decimal("100.6")
    assert str(exact(Decimal("10.000000000000"))) == "10"
    assert str(exact(Decimal("0E-12"))) == "0"
    assert str(exact(Decimal("1E+3"))) == "1000"
    assert exact(42) == 42 and isinstance(exact(42), int)


def test_the_layout_names_the_type_and_the_window() -> None:
    assert value_type("wordcount", 12) == "bigint"
    assert value_type("keyed-sum", 4) == "decimal(38,4)"
    assert state_layout("wordcount", 12) == "aggregate/bigint"
    assert (
        state_layout("keyed-sum", 6, 60_000, 10_000)
        == "aggregate/decimal(38,6)+window/60000/10000ms"
    )


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("12.5000000000", "12.5"),
        ("1E+2", "100"),
        ("0.00", "0"),
        # More digits than Python's default context holds (28): a decimal(38, s) total.
        ("1" + "0" * 37 + ".0", "1" + "0" * 37),
        ("2.000000000000000000000000000E+38", "2" + "0" * 38),
    ],
)
def test_a_total_is_exact_whatever_its_digits(text: str, written: str) -> None:
    assert format(exact(Decimal(text)), "f") == written
