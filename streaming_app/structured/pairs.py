"""Lines to (key, value) pairs with the DStream jobs' own tokenizer and CSV parsing.

`to_pairs` runs on the executors, once per partition of a micro-batch (`mapInArrow`): it
reads the partition's lines from Arrow record batches and pre-aggregates them the way the
DStream jobs do (`count_words`, `parse_sums`), so the shuffle into the state carries one
pair per key and partition. Values travel as text (format_value): counts and exact sums
alike, never a float. What the partition's source skipped or repaired (the Kafka source's
`problems` column) and its bad CSV rows travel as problem pairs (problems.py). The driver
only wires it (`pairs_of`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming_app.jobs.counting import csv_spec
from streaming_app.jobs.keyed import CsvSpec, parse_sums
from streaming_app.jobs.text import count_words
from streaming_app.settings.schema import AppConfig
from streaming_app.sinks.files_layout import format_value
from streaming_app.structured import problems as problem_counts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PAIRS_SCHEMA = "key string, value string"
ROWS_PER_BATCH = 10_000  # rows per Arrow record batch handed back to Spark


def partition_pairs(
    lines: Iterable[str],
    job: str,
    spec: CsvSpec | None,
    pattern: str,
    lowercase: bool,
    problems: Counter[str] | None = None,
) -> Iterator[tuple[str, str]]:
    """One partition's lines as (key, value text) pairs, one per key; bad CSV rows dropped
    and counted into `problems`."""
    if job == "keyed-sum":
        assert spec is not None
        for key, value in parse_sums(lines, spec):
            if key is not None:
                yield key, format_value(value)
            elif problems is not None:
                problem_counts.bad_rows(value, problems)
        return
    for word, count in count_words(lines, pattern, lowercase):
        yield word, str(count)


def _lines(batches: Iterable[Any], problems: Counter[str]) -> Iterator[str]:
    """The lines of Arrow batches (column 0); a second column's problems into `problems`."""
    for batch in batches:
        if batch.num_columns > 1:
            for text in batch.column(1).drop_null().to_pylist():
                problem_counts.decode(text, problems)
        for line in batch.column(0).to_pylist():
            if line is not None:
                yield line


def to_pairs(
    batches: Iterable[Any], job: str, spec: CsvSpec | None, pattern: str, lowercase: bool
) -> Iterator[Any]:
    """mapInArrow function: a partition's Arrow batches of lines to batches of pairs."""
    import pyarrow as pa

    keys: list[str] = []
    values: list[str] = []
    problems: Counter[str] = Counter()
    lines = _lines(batches, problems)
    for key, value in partition_pairs(lines, job, spec, pattern, lowercase, problems):
        keys.append(key)
        values.append(value)
        if len(keys) == ROWS_PER_BATCH:
            yield pa.RecordBatch.from_arrays([pa.array(keys), pa.array(values)], ["key", "value"])
            keys, values = [], []
    for key, value in problem_counts.as_pairs(problems):  # once every line was read
        keys.append(key)
        values.append(value)
    if keys:
        yield pa.RecordBatch.from_arrays([pa.array(keys), pa.array(values)], ["key", "value"])


def pairs_of(lines: DataFrame, config: AppConfig) -> DataFrame:
    """The (key, value) pairs of a streaming DataFrame of lines (one `value` column)."""
    spec = csv_spec(config) if config.job == "keyed-sum" else None
    function = partial(
        to_pairs,
        job=config.job,
        spec=spec,
        pattern=config.token_pattern,
        lowercase=config.lowercase,
    )
    return lines.mapInArrow(function, PAIRS_SCHEMA)
