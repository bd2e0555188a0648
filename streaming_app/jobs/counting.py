"""The two jobs on one pipeline: word counts (the default) and keyed sums of CSV records.

Each job is a per-partition pre-aggregation, a reduce function with its inverse (for the
sliding window) and an update function; everything else (sources, the checkpoint guard,
snapshots, sinks) is shared. The driver picks the functions here when it builds the
graph; Spark then runs them on the executors (pre-aggregation, reduce) and in the state
update. All are module-level, so the checkpoint refers to them by name.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from streaming_app.jobs.keyed import (
    CsvSpec,
    add_sums,
    is_sum,
    parse_sums,
    subtract_sums,
    update_sum,
)
from streaming_app.jobs.text import add_counts, count_words, update_count
from streaming_app.settings.schema import AppConfig


def subtract_counts(a: int, b: int) -> int:
    """Inverse of add_counts: a batch leaving the window."""
    return a - b


def csv_spec(config: AppConfig) -> CsvSpec:
    """How the keyed-sum job reads a record."""
    assert config.key_field and config.value_field
    spec: CsvSpec = CsvSpec.of(
        config.csv_fields, config.key_field, config.value_field, config.csv_delimiter,
        config.csv_header,
    )  # fmt: skip
    return spec


def per_partition(lines: Any, config: AppConfig) -> Any:
    """(key, value) pairs of each partition of a DStream or RDD of lines, not yet reduced.

    Each partition has one pair per key; the keyed-sum job adds one (None, BadRows) pair
    per partition with bad rows, which values_only drops.
    """
    if config.job == "keyed-sum":
        return lines.mapPartitions(partial(parse_sums, spec=csv_spec(config)))
    return lines.mapPartitions(
        partial(count_words, pattern=config.token_pattern, lowercase=config.lowercase)
    )


def pre_aggregated(lines: Any, config: AppConfig, partitions: int | None = None) -> Any:
    """(key, value) pairs of a DStream or RDD of lines, reduced per key (into `partitions`,
    Spark's default parallelism if None)."""
    return per_partition(lines, config).reduceByKey(reduce_functions(config)[0], partitions)


def values_only(pairs: Any, config: AppConfig) -> Any:
    """The pairs without the keyed-sum job's bad-rows record."""
    return pairs.filter(is_sum) if config.job == "keyed-sum" else pairs


def with_presence(pair: tuple[str, Any]) -> tuple[str, tuple[Any, int]]:
    """A batch's sum with a count of 1 for the window: in how many batches the key is."""
    return pair[0], (pair[1], 1)


def add_present(a: tuple[Any, int], b: tuple[Any, int]) -> tuple[Any, int]:
    """Window reduce function of (sum, batches)."""
    return add_sums(a[0], b[0]), a[1] + b[1]


def subtract_present(a: tuple[Any, int], b: tuple[Any, int]) -> tuple[Any, int]:
    """Its inverse: a batch leaving the window."""
    return subtract_sums(a[0], b[0]), a[1] - b[1]


def present(pair: tuple[str, tuple[Any, int]]) -> bool:
    """A key stays while a batch in the window has it, even if its sum is zero."""
    return pair[1][1] > 0


def sum_only(pair: tuple[str, tuple[Any, int]]) -> tuple[str, Any]:
    """The window's sum of a key."""
    return pair[0], pair[1][0]


def reduce_functions(config: AppConfig) -> tuple[Any, Any]:
    """The job's reduce function and its inverse."""
    if config.job == "keyed-sum":
        return add_sums, subtract_sums
    return add_counts, subtract_counts


def update_function(config: AppConfig) -> Any:
    """The job's updateStateByKey function (None only for keys that never had a value)."""
    return update_sum if config.job == "keyed-sum" else update_count
