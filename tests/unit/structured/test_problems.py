"""Read problems (Kafka values skipped or repaired, bad CSV rows) carried beside the totals."""

from __future__ import annotations

from collections import Counter

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


def test_kafka_problems_become_tagged_pairs_after_the_words() -> None:
    batches = [
        _kafka_rows(["a b", "a"], [None, None]),
        _kafka_rows([None], ["oversize=1 replaced=2"]),
        _kafka_rows(["b"], [None]),
        _kafka_rows([None], ["replaced=1"]),
    ]
    out = list(to_pairs(iter(batches), "wordcount", None, DEFAULT_TOKEN_PATTERN, True))
    rows = [pair for b in out for pair in zip(*(c.to_pylist() for c in b.columns), strict=True)]
    assert rows == [("a", "2"), ("b", "2"), ("oversize", "problem:1"), ("replaced", "problem:3")]


def test_bad_csv_rows_are_counted_by_reason() -> None:
    lines = ["region,amount", "eu,1", "broken", "us,x", "us,y", ",5"]
    batch = pa.RecordBatch.from_arrays([pa.array(lines)], ["value"])
    out = list(to_pairs(iter([batch]), "keyed-sum", SPEC, DEFAULT_TOKEN_PATTERN, True))
    rows = dict(pair for b in out for pair in zip(*(c.to_pylist() for c in b.columns), strict=True))
    assert rows == {"eu": "1", "csv-columns": "problem:1", "csv-value": "problem:2",
                    "csv-key": "problem:1"}  # fmt: skip


def test_the_driver_takes_the_problems_out_of_the_totals_and_warns_like_dstreams() -> None:
    rows = [("a", "5"), ("oversize", "problem:2"), ("csv-value", "problem:1"), ("b", "7")]
    totals, found = problems.split(rows)
    assert totals == [("a", "5"), ("b", "7")]
    since = Counter({"oversize": 5, "empty": 1, "csv-value": 3})
    lines = problems.warnings(found, since, "amount", "region")
    assert lines == [
        "kafka values skipped or repaired: oversize=2 (empty/null and oversize values are "
        "skipped; replaced = invalid UTF-8 decoded with U+FFFD; lost = gone to retention; "
        "since start: empty=1, oversize=5)",
        "skipped 1 bad CSV rows (amount not a number=1; 3 since start)",
    ]
    assert problems.warnings(Counter(), since, "amount", "region") == []


def test_the_processor_passes_problem_counts_on_summed_and_stores_nothing() -> None:
    from pyspark.sql import Row

    from streaming_app.structured.processor import RunningTotals

    processor = RunningTotals("wordcount")  # no init: the state is never touched
    pairs = [Row(key="empty", value="problem:1"), Row(key="oversize", value="problem:2"),
             Row(key="empty", value="problem:3")]  # fmt: skip
    out = list(processor.handleInputRows((problems.PROBLEMS_BUCKET,), iter(pairs), None))
    assert [(r.key, r.total) for r in out] == [("empty", "problem:4"), ("oversize", "problem:2")]
