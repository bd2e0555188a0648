"""Lines to (key, value) pairs with the DStream jobs' own tokenizer and CSV parsing.

`to_pairs` runs on the executors, once per partition of a micro-batch (`mapInArrow`): it
reads the partition's lines from Arrow record batches and pre-aggregates them the way the
DStream jobs do (`count_words`, `parse_sums`), so the shuffle into the state carries one
pair per key and partition. Values are the state's type (state_layout.py): counts as
`bigint`, exact sums as `decimal(38, sum_scale)`, never a float; a sum the type cannot
hold exactly is a bad row. What the partition's source skipped or repaired (the Kafka
source's `problems` column) and its bad rows are added to the query's problem
accumulator (problems.py). The driver only wires it (`pairs_of`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming_app.jobs.counting import csv_spec
from streaming_app.jobs.keyed import CsvSpec, parse_sums
from streaming_app.jobs.text import count_words
from streaming_app.lifecycle.worker_daemon import freeze_once
from streaming_app.settings.schema import AppConfig
from streaming_app.structured import problems as problem_counts
from streaming_app.structured.state_layout import KEY, PRECISION, VALUE, fits, value_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ROWS_PER_BATCH = 10_000  # rows per Arrow record batch handed back to Spark


def partition_pairs(
    lines: Iterable[str],
    job: str,
    spec: CsvSpec | None,
    pattern: str,
    lowercase: bool,
    problems: Counter[str] | None = None,
    scale: int = 12,
) -> Iterator[tuple[str, Any]]:
    """One partition's lines as (key, value) pairs, one per key; bad CSV rows, and sums not
    exact in decimal(38, scale), dropped and counted into `problems`, as are the words."""
    if job == "keyed-sum":
        assert spec is not None
        for key, value in parse_sums(lines, spec, partial(fits, scale=scale)):
            if key is not None:
                yield key, value
            elif problems is not None:
                problem_counts.bad_rows(value, problems)
        return
    words = 0
    for pair in count_words(lines, pattern, lowercase):
        words += pair[1]
        yield pair
    if problems is not None:
        problems[problem_counts.WORDS] += words


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
    batches: Iterable[Any],
    job: str,
    spec: CsvSpec | None,
    pattern: str,
    lowercase: bool,
    scale: int = 12,
    accumulator: Any = None,
) -> Iterator[Any]:
    """mapInArrow function: a partition's Arrow batches of lines to batches of pairs.

    accumulator: the query's problem counts (problems.ProblemCounts), added to once the
    partition's lines were read."""
    import pyarrow as pa

    freeze_once()  # what this worker imported since its fork, Arrow above among them
    arrow_type = pa.decimal128(PRECISION, scale) if job == "keyed-sum" else pa.int64()

    def batch(keys: list[str], values: list[Any]) -> Any:
        arrays = [pa.array(keys, pa.string()), pa.array(values, arrow_type)]
        return pa.RecordBatch.from_arrays(arrays, [KEY, VALUE])

    keys: list[str] = []
    values: list[Any] = []
    problems: Counter[str] = Counter()
    lines = _lines(batches, problems)
    for key, value in partition_pairs(lines, job, spec, pattern, lowercase, problems, scale):
        keys.append(key)
        values.append(value)
        if len(keys) == ROWS_PER_BATCH:
            yield batch(keys, values)
            keys, values = [], []
    if keys:
        yield batch(keys, values)
    if accumulator is not None and +problems:
        accumulator.add(problems)


def pairs_schema(config: AppConfig) -> str:
    """The pairs' Spark schema: the key, and the value in the state's type."""
    return f"{KEY} string, {VALUE} {value_type(config.job, config.sum_scale)}"


def pairs_of(lines: DataFrame, config: AppConfig, accumulator: Any = None) -> DataFrame:
    """The (key, value) pairs of a streaming DataFrame of lines (one `value` column)."""
    spec = csv_spec(config) if config.job == "keyed-sum" else None
    function = partial(
        to_pairs,
        job=config.job,
        spec=spec,
        pattern=config.token_pattern,
        lowercase=config.lowercase,
        scale=config.sum_scale,
        accumulator=accumulator,
    )
    return lines.mapInArrow(function, pairs_schema(config))
