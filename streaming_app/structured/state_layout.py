"""What the structured engine's state looks like in a checkpoint, and its values (no Spark).

The running totals are Spark's own streaming aggregation, `groupBy(key).agg(sum(value))`:
the JVM keeps one row per key in the state store, and the state data source reads it back
as `key.key` and `value.sum` (the aggregation's buffer). A word count's totals are
`bigint`; a keyed sum's are `decimal(38, sum_scale)`, exact, so a value with more fraction
digits than `sum_scale` or more than 38 - `sum_scale` integer digits is a bad row (counted,
warned of, skipped), never rounded. A checkpoint's layout is fixed when it is made
(guard.py records it): another value type, or the per-bucket map state of 9827bb2, is
refused.
"""

from __future__ import annotations

from decimal import Context, Decimal, InvalidOperation

PRECISION = 38  # Spark's widest decimal: a sum of decimal(38, s) stays decimal(38, s)
KEY = "key"
VALUE = "value"
TOTAL = "total"
SUM_FIELD = "sum"  # the aggregation buffer's field in the state data source's `value`
_WIDE = Context(prec=2 * PRECISION)  # quantize a value of any size without an error


def value_type(job: str, scale: int) -> str:
    """Spark's SQL type of a job's values and totals."""
    return f"decimal({PRECISION},{scale})" if job == "keyed-sum" else "bigint"


def state_layout(job: str, scale: int, window_ms: int | None = None, slide_ms: int = 0) -> str:
    """The layout recorded in a checkpoint's guard record (a window's query's state too)."""
    layout = f"aggregate/{value_type(job, scale)}"
    return layout if window_ms is None else f"{layout}+window/{window_ms}/{slide_ms}ms"


def fits(value: Decimal, scale: int) -> bool:
    """Whether a keyed-sum value is exact in decimal(38, scale): no rounding, no overflow."""
    if not value.is_finite():
        return False
    if value.is_zero():
        return True
    try:
        exact = value.quantize(Decimal(1).scaleb(-scale), context=_WIDE) == value
    except InvalidOperation:
        return False
    return exact and value.adjusted() < PRECISION - scale


def exact(value: int | Decimal) -> int | Decimal:
    """A total as the DStream engine keeps it: an int, or a Decimal without trailing zeros."""
    if not isinstance(value, Decimal):
        return int(value)
    normal = value.normalize(_WIDE)
    whole = normal.as_tuple().exponent > 0  # type: ignore[operator]
    return normal.quantize(Decimal(1), context=_WIDE) if whole else normal
