"""The keyed-sum job: CSV records in, an exact decimal sum of one field per key out.

Runs on the executors (parse_sums) and in updateStateByKey (update_sum). Module-level
functions only: the checkpoint refers to them by name.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Context, Decimal, Inexact, InvalidOperation
from typing import Any

from streaming_app.common.prometheus import count_bad_values

log = logging.getLogger(__name__)

# Sums never round: a result that does not fit raises instead of drifting. Amounts are
# bounded (parse_amount) so that no sum of them comes near the precision.
EXACT = Context(prec=100, traps=[Inexact, InvalidOperation])
MAX_DIGITS = 30  # on either side of the decimal point
SAMPLES = 3  # bad rows quoted per batch


@dataclass(frozen=True)
class CsvSpec:
    """How to read one record: captured into the checkpoint (plain values only)."""

    fields: tuple[str, ...]
    key_index: int
    value_index: int
    delimiter: str = ","
    skip_header: bool = True

    @classmethod
    def of(cls, fields: tuple[str, ...], key: str, value: str, delimiter: str, header: bool) -> Any:
        """The spec of named key and value fields."""
        return cls(fields, fields.index(key), fields.index(value), delimiter, header)


@dataclass(frozen=True)
class BadRows:
    """Rows of a batch that were skipped, by reason, with a few of them quoted."""

    columns: int = 0  # wrong number of fields
    value: int = 0  # the value field is not a finite number
    key: int = 0  # the key field is empty
    samples: tuple[str, ...] = ()
    range: int = 0  # a number the job's `accept` refused (the structured state's decimal)

    @property
    def total(self) -> int:
        """All skipped rows."""
        return self.columns + self.value + self.key + self.range

    def __add__(self, other: BadRows) -> BadRows:
        return BadRows(
            self.columns + other.columns,
            self.value + other.value,
            self.key + other.key,
            (self.samples + other.samples)[:SAMPLES],
            self.range + other.range,
        )


def parse_amount(text: str) -> Decimal | None:
    """A finite decimal number with at most 30 digits before and 30 after the point, or None.

    Within those bounds every sum of up to 10^39 amounts is exact in 100 digits; beyond
    them a value is no amount but would make the sums round (or the app crash-loop).
    """
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent < -MAX_DIGITS or (number and number.adjusted() >= MAX_DIGITS):
        return None
    return number


def parse_sums(
    lines: Iterable[str], spec: CsvSpec, accept: Callable[[Decimal], bool] | None = None
) -> Iterator[tuple[Any, Any]]:
    """One partition's records summed per key, plus (None, BadRows) if any row was bad.

    Pre-aggregated like count_words, so the shuffle carries one pair per key. `accept`, if
    given, refuses a row's number before it is added (counted as `range`).
    """
    sums: dict[str, Decimal] = {}
    bad = BadRows()
    width = len(spec.fields)
    for line in lines:
        if not line.strip():
            continue
        try:
            row = next(csv.reader([line], delimiter=spec.delimiter), [])
        except csv.Error:  # an over-long field, a NUL byte (Python 3.10)
            bad += BadRows(columns=1, samples=(line[:200],))
            continue
        if spec.skip_header and tuple(f.strip() for f in row) == spec.fields:
            continue
        if len(row) != width:
            bad += BadRows(columns=1, samples=(line[:200],))
            continue
        amount = parse_amount(row[spec.value_index])
        if amount is None:
            bad += BadRows(value=1, samples=(line[:200],))
            continue
        if accept is not None and not accept(amount):
            bad += BadRows(range=1, samples=(line[:200],))
            continue
        key = row[spec.key_index].strip()
        if not key:
            bad += BadRows(key=1, samples=(line[:200],))
            continue
        sums[key] = EXACT.add(sums.get(key, Decimal(0)), amount)
    yield from sums.items()
    if bad.total:
        yield None, bad


def add_sums(a: Any, b: Any) -> Any:
    """Reduce function of per-batch sums (and of BadRows, under the None key)."""
    if isinstance(a, BadRows):
        return a + b
    return EXACT.add(a, b)


def subtract_sums(a: Decimal, b: Decimal) -> Decimal:
    """Inverse of add_sums for the sliding window."""
    return EXACT.subtract(a, b)


def is_sum(pair: tuple[Any, Any]) -> bool:
    """Not the bad-rows record."""
    return pair[0] is not None


def update_sum(new: Iterable[Decimal], total: Decimal | None) -> Decimal | None:
    """updateStateByKey function: the running sum after this batch (exact)."""
    values = list(new)
    if total is None and not values:
        return None
    result = total if total is not None else Decimal(0)
    for value in values:
        result = EXACT.add(result, value)
    return result


# Bad rows since this driver process started, for the warning's running total.
_seen = BadRows()


def report_bad_rows(batch_time: Any, rdd: Any, spec: CsvSpec) -> None:
    """Driver side: warn about the batch's skipped rows, quoting a few."""
    global _seen
    from streaming_app.common.batch_time import epoch_ms

    found = rdd.filter(lambda pair: pair[0] is None).values().collect()
    if not found:
        return
    bad = sum(found, BadRows())
    _seen += bad
    count_bad_values({"csv_columns": bad.columns, "csv_value": bad.value, "csv_key": bad.key})
    reasons = [
        f"{name}={count}"
        for name, count in (
            ("wrong field count", bad.columns),
            (f"{spec.fields[spec.value_index]} not a number", bad.value),
            (f"{spec.fields[spec.key_index]} empty", bad.key),
        )
        if count
    ]
    log.warning(
        "batch_time_ms=%d: skipped %d bad CSV rows (%s; %d since start), e.g. %s",
        epoch_ms(batch_time),
        bad.total,
        ", ".join(reasons),
        _seen.total,
        " | ".join(repr(s) for s in bad.samples),
    )
