"""The keyed-sum job's parsing and exact sums, without Spark."""

from __future__ import annotations

from decimal import Decimal

import pytest

from streaming_app.errors import ConfigError
from streaming_app.jobs.keyed import (
    BadRows,
    CsvSpec,
    add_sums,
    is_sum,
    parse_amount,
    parse_sums,
    subtract_sums,
    update_sum,
)
from streaming_app.settings.loading import load_config

FIELDS = ("transactionId", "customerId", "itemId", "amountPaid")
SPEC = CsvSpec.of(FIELDS, "customerId", "amountPaid", ",", True)


def test_rows_are_summed_per_key_exactly_and_the_header_is_skipped() -> None:
    lines = [
        "transactionId,customerId,itemId,amountPaid",
        "111,1,333,100.10",
        "112,2,334,0.20",
        "113,1,335,0.10",
        '114,"1",336,"-0.20"',
        "",
    ]
    assert dict(parse_sums(lines, SPEC)) == {"1": Decimal("100.00"), "2": Decimal("0.20")}


def test_floats_would_drift_where_the_sums_do_not() -> None:
    lines = [f"{i},c,x,0.1" for i in range(1000)]
    [(key, total)] = list(parse_sums(lines, SPEC))
    assert key == "c"
    assert total == Decimal("100.0")
    assert sum(0.1 for _ in range(1000)) != 100.0  # what a float sum would give


def test_bad_rows_are_counted_and_quoted_not_fatal() -> None:
    lines = ["1,a,x,1.5", "2,a,x", "3,b,x,abc", "4,,x,2", "5,c,x,NaN", "6,c,x,1e99", "7,a,x,2"]
    pairs = list(parse_sums(lines, SPEC))
    sums = {k: v for k, v in pairs if is_sum((k, v))}
    [bad] = [v for k, v in pairs if k is None]
    assert sums == {"a": Decimal("3.5")}
    assert (bad.columns, bad.value, bad.key, bad.total) == (1, 3, 1, 5)
    assert bad.samples == ("2,a,x", "3,b,x,abc", "4,,x,2")


def test_a_partition_without_bad_rows_sends_no_bad_record() -> None:
    assert all(key is not None for key, _ in parse_sums(["1,a,x,1"], SPEC))


def test_other_delimiters_and_no_header_skipping() -> None:
    spec = CsvSpec.of(("k", "v"), "k", "v", "\t", False)
    assert dict(parse_sums(["k\tv", "a\t2", "a\t3"], spec)) == {
        "a": Decimal(5),
        None: BadRows(value=1, samples=("k\tv",)),
    }


def test_reduce_and_inverse_functions() -> None:
    assert add_sums(Decimal("0.1"), Decimal("0.2")) == Decimal("0.3")
    assert add_sums(BadRows(columns=1), BadRows(value=2)).total == 3
    assert subtract_sums(Decimal("0.3"), Decimal("0.1")) == Decimal("0.2")


def test_update_sum_keeps_absent_keys_absent_and_adds_exactly() -> None:
    assert update_sum([], None) is None
    assert update_sum([Decimal("0")], None) == Decimal("0")  # a zero amount is a total
    assert update_sum([Decimal("0.1"), Decimal("0.2")], Decimal("1")) == Decimal("1.3")
    assert update_sum([], Decimal("5")) == Decimal("5")


def test_parse_amount_accepts_plain_numbers_only() -> None:
    assert parse_amount(" 12.50 ") == Decimal("12.50")
    assert parse_amount("-3") == Decimal(-3)
    assert parse_amount("1e29") == Decimal("1e29") and parse_amount("1e-30") is not None
    for text in ("", "x", "NaN", "Infinity", "1e30", "1e-31", "0e-50", "0." + "1" * 120, "1,5"):
        assert parse_amount(text) is None, text


def test_rows_that_would_break_the_exact_sums_or_the_csv_reader_are_bad_rows() -> None:
    lines = [
        "1,a,x,1e29",
        "2,a,x,1e-30",  # with the previous one: 59 digits, exact
        "3,a,x,1.2345678901234567890123e-40",  # too many decimals: would round the sum
        "4,b,x," + "9" * 200,  # too large
        "5,c,x," + '"' + "y" * 200_000 + '"',  # over the csv module's field limit
    ]
    pairs = dict(parse_sums(lines, SPEC))
    # Not Decimal's default 28 digits, which would round this sum to 1e29.
    assert pairs["a"] == Decimal("100000000000000000000000000000.000000000000000000000000000001")
    bad = pairs[None]
    assert isinstance(bad, BadRows) and bad.total == 3
    assert update_sum([Decimal("1e-30")], Decimal("1e29") * 9) is not None  # no Inexact


def keyed(**settings: str) -> dict[str, str]:
    return {"job": "keyed-sum", "csv_fields": ",".join(FIELDS), **settings}


def test_keyed_sum_needs_its_fields() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cli={"job": "keyed-sum"})
    assert "csv_fields: required" in str(caught.value)
    assert "key_field: required" in str(caught.value)
    with pytest.raises(ConfigError, match="--key-field: 'nope' is not one of csv_fields"):
        load_config(cli=keyed(key_field="nope", value_field="amountPaid"))
    with pytest.raises(ConfigError, match="--value-field: must differ"):
        load_config(cli=keyed(key_field="itemId", value_field="itemId"))
    config = load_config(cli=keyed(key_field="customerId", value_field="amountPaid"))
    assert config.csv_fields == FIELDS


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"window": "2.5"}, "--window: must be a multiple of the batch interval"),
        ({"window": "4", "slide": "3"}, "--window: must be a multiple of the slide (3 s)"),
        ({"window": "6", "slide": "3", "checkpoint_interval": "5"}, "multiple of the slide"),
        ({"slide": "2"}, "--slide: needs a window"),
        ({"window": "-1"}, "--window: must be a positive number of seconds"),
    ],
)
def test_window_validation(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cli=settings)
    assert message in str(caught.value)
    assert caught.value.exit_code == 2


def test_a_valid_window() -> None:
    config = load_config(cli={"window": "6", "slide": "2", "checkpoint_interval": "10"})
    assert (config.window_ms, config.slide_ms) == (6000, 2000)
    assert load_config(cli={"window": "3"}).slide_ms == 1000  # default: every batch


def test_window_sums_keep_a_key_while_a_batch_has_it_even_at_zero() -> None:
    from streaming_app.jobs.counting import (
        add_present,
        present,
        subtract_present,
        sum_only,
        with_presence,
    )

    refund = add_present(with_presence(("c", Decimal(5)))[1], with_presence(("c", Decimal(-5)))[1])
    assert refund == (Decimal(0), 2) and present(("c", refund))
    gone = subtract_present(subtract_present(refund, (Decimal(5), 1)), (Decimal(-5), 1))
    assert gone == (Decimal(0), 0) and not present(("c", gone))
    assert sum_only(("c", (Decimal("1.5"), 3))) == ("c", Decimal("1.5"))
