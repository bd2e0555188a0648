"""Read problems (Kafka values skipped or repaired, bad CSV rows) counted beside the totals."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pyarrow as pa

from streaming_app.jobs.keyed import CsvSpec
from streaming_app.settings.rules import DEFAULT_TOKEN_PATTERN
from streaming_app.structured import problems
from streaming_app.structured.pairs import to_pairs

SPEC = CsvSpec.of(("region", "amount"), "region", "amount", ",", True)


def test_a_range_s_counts_say_only_what_is_worth_a_warning() -> None:
    assert problems.encode({"records": 9, "empty": 2, "lost": 1}) == "empty=2 lost=1"
    assert problems.encode({"records": 9}) is None
    found: Counter[str] = Counter()
    problems.decode("empty=2 lost=1", found)
    problems.decode("empty=1", found)
    assert found == {"empty": 3, "lost": 1}


def _kafka_rows(values: list[str | None], texts: list[str | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(values, pa.string()), pa.array(texts, pa.string())], ["value", "problems"]
    )


class Accumulator:
    """Spark's accumulator as the executors use it: add() through its param."""

    def __init__(self) -> None:
        self.param = problems.ProblemCounts()
        self.value: Counter[str] = self.param.zero(Counter())

    def add(self, more: Counter[str]) -> None:
        self.value = self.param.addInPlace(self.value, more)


def _pairs(out: list[pa.RecordBatch]) -> list[tuple[str, object]]:
    return [pair for b in out for pair in zip(*(c.to_pylist() for c in b.columns), strict=True)]


def test_kafka_problems_go_to_the_accumulator_not_to_the_pairs() -> None:
    batches = [
        _kafka_rows(["a b", "a"], [None, None]),
        _kafka_rows([None], ["oversize=1 replaced=2"]),
        _kafka_rows(["b"], [None]),
        _kafka_rows([None], ["replaced=1"]),
    ]
    found = Accumulator()
    out = list(to_pairs(iter(batches), "wordcount", None, DEFAULT_TOKEN_PATTERN, True,
                        accumulator=found))  # fmt: skip
    assert _pairs(out) == [("a", 2), ("b", 2)]
    # The words counted go to the accumulator too, for the metrics.
    assert found.value == {"words": 4, "oversize": 1, "replaced": 3}
    to_pairs_again = to_pairs(iter(batches[1:2]), "wordcount", None, DEFAULT_TOKEN_PATTERN, True,
                              accumulator=found)  # fmt: skip
    assert list(to_pairs_again) == []
    assert found.value == {"words": 4, "oversize": 2, "replaced": 5}


def test_bad_csv_rows_and_inexact_sums_are_counted_by_reason() -> None:
    lines = ["region,amount", "eu,1", "broken", "us,x", "us,y", ",5", "eu,0.0000000000001",
             "eu,1" + "0" * 26, "us,2.5"]  # fmt: skip
    batch = pa.RecordBatch.from_arrays([pa.array(lines)], ["value"])
    found = Accumulator()
    out = list(to_pairs(iter([batch]), "keyed-sum", SPEC, DEFAULT_TOKEN_PATTERN, True,
                        scale=12, accumulator=found))  # fmt: skip
    assert dict(_pairs(out)) == {"eu": Decimal(1), "us": Decimal("2.5")}
    assert out[0].schema.field("value").type == pa.decimal128(38, 12)
    assert found.value == {"csv-columns": 1, "csv-value": 2, "csv-key": 1, "csv-range": 2}


def test_the_driver_warns_of_what_a_micro_batch_added_like_dstreams() -> None:
    before = Counter({"oversize": 3, "empty": 1, "csv-value": 2})
    now = Counter({"oversize": 5, "empty": 1, "csv-value": 3, "csv-range": 1})
    found = problems.since(now, before)
    assert found == {"oversize": 2, "csv-value": 1, "csv-range": 1}
    lines = problems.warnings(found, now, "amount", "region", "decimal(38,12)")
    assert lines == [
        "kafka values skipped or repaired: oversize=2 (empty/null and oversize values are "
        "skipped; replaced = invalid UTF-8 decoded with U+FFFD; lost = gone to retention; "
        "since start: empty=1, oversize=5)",
        "skipped 2 bad CSV rows (amount not a number=1, amount not exact in decimal(38,12)=1; "
        "4 since start)",
    ]
    assert problems.warnings(Counter(), now, "amount", "region") == []
    assert problems.since(now, now) == Counter()


def test_a_micro_batchs_words_and_bad_values_reach_the_metrics_by_reason() -> None:
    found = Counter({"words": 7, "oversize": 2, "csv-value": 1})
    assert problems.by_reason(found) == {
        "empty": 0, "oversize": 2, "replaced": 0, "lost": 0,
        "csv_columns": 0, "csv_value": 1, "csv_key": 0, "csv_range": 0,
    }  # fmt: skip
    problems.note_words(41, found)
    problems.note_words(42, Counter())  # a micro-batch without words counted 0 of them
    assert (problems.batch_words(41), problems.batch_words(42)) == (7, 0)
    assert problems.batch_words(41) is None  # forgotten once asked
    # Nothing but problems is warned of: the words are no problem.
    assert problems.warnings(Counter({"words": 7}), found, "amount", "region") == []
