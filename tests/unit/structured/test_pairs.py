"""Lines to pairs on the executors: the DStream jobs' tokenizer and CSV parsing, typed values."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa

from streaming_app.jobs.keyed import CsvSpec
from streaming_app.settings.rules import DEFAULT_TOKEN_PATTERN
from streaming_app.structured import pairs as pairs_module
from streaming_app.structured.pairs import partition_pairs, to_pairs

SPEC = CsvSpec.of(("region", "amount"), "region", "amount", ",", True)


def test_words_are_counted_per_partition_with_the_dstream_tokenizer() -> None:
    lines = ["The cat, the HAT", "café cafe\u0301 don't"]
    found = dict(partition_pairs(lines, "wordcount", None, DEFAULT_TOKEN_PATTERN, True))
    assert found == {"the": 2, "cat": 1, "hat": 1, "café": 2, "don't": 1}


def test_csv_records_are_summed_exactly_and_bad_rows_dropped() -> None:
    lines = ["region,amount", "eu,0.1", "eu,0.2", "us,1e3", "broken", "us,x", ",5"]
    found = dict(partition_pairs(lines, "keyed-sum", SPEC, DEFAULT_TOKEN_PATTERN, True))
    assert found == {"eu": Decimal("0.3"), "us": Decimal(1000)}


def _batches(lines: list[str], size: int) -> Iterator[Any]:
    for start in range(0, len(lines), size):
        yield pa.RecordBatch.from_arrays([pa.array(lines[start : start + size])], ["value"])


def test_arrow_batches_in_arrow_batches_of_pairs_out(monkeypatch: Any) -> None:
    monkeypatch.setattr(pairs_module, "ROWS_PER_BATCH", 2)
    lines = ["a b c", "a b", "a"]
    out = list(to_pairs(_batches(lines, 2), "wordcount", None, DEFAULT_TOKEN_PATTERN, True))
    assert [batch.num_rows for batch in out] == [2, 1]
    rows = {k: v for b in out for k, v in zip(*(c.to_pylist() for c in b.columns), strict=True)}
    assert rows == {"a": 3, "b": 2, "c": 1}
    assert out[0].schema.names == ["key", "value"]
    assert out[0].schema.field("value").type == pa.int64()


def test_an_empty_partition_yields_nothing() -> None:
    assert list(to_pairs(iter([]), "wordcount", None, DEFAULT_TOKEN_PATTERN, True)) == []
