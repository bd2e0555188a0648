"""What a micro-batch's sources skipped or repaired, carried to the driver with its totals.

No Spark needed. The Kafka source adds a `problems` column to its rows (its read counts,
`empty=2 oversize=1`, on one row a range); the keyed-sum job's parsing counts its bad CSV
rows. The pairs of a partition then carry these counts as pairs of their own, whose
value is `PROBLEM_TAG` and the count, never a number: `bucketed` sends them to
`PROBLEMS_BUCKET`, the processor passes them on summed and stores nothing, and the driver
takes them out of the micro-batch's output before the sinks (`split`) and warns with the
DStream engine's lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

PROBLEMS_BUCKET = -1  # not a bucket of the state: problem counts, passed through
PROBLEM_TAG = "problem:"  # a pair's value or an output total that is a count of problems
KAFKA = ("empty", "oversize", "replaced", "lost")  # the Kafka read counts that are warned
CSV = ("columns", "value", "key")  # BadRows' reasons
CSV_PREFIX = "csv-"


def encode(counts: dict[str, int]) -> str | None:
    """A range's read counts as the Kafka source's `problems` text (None: nothing to say)."""
    found = [f"{kind}={counts[kind]}" for kind in KAFKA if counts.get(kind)]
    return " ".join(found) or None


def decode(text: str | None, into: Counter[str]) -> None:
    """Add a `problems` text's counts to `into`."""
    for item in (text or "").split():
        kind, _, count = item.partition("=")
        into[kind] += int(count)


def bad_rows(bad: Any, into: Counter[str]) -> None:
    """Add a keyed-sum BadRows' counts to `into`, as csv-<reason>."""
    for reason in CSV:
        into[CSV_PREFIX + reason] += getattr(bad, reason)


def as_pairs(counts: Counter[str]) -> Iterator[tuple[str, str]]:
    """A partition's problem counts as (kind, tagged count) pairs."""
    for kind, count in sorted(counts.items()):
        if count:
            yield kind, f"{PROBLEM_TAG}{count}"


def summed(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """The processor's pass-through: the partitions' problem pairs summed per kind."""
    total: Counter[str] = Counter()
    for kind, value in pairs:
        total[kind] += int(value[len(PROBLEM_TAG) :])
    return as_pairs(total)


def split(rows: Iterable[tuple[str, str]]) -> tuple[list[tuple[str, str]], Counter[str]]:
    """A micro-batch's output rows: (the changed totals, the problem counts)."""
    totals, problems = [], Counter[str]()
    for key, total in rows:
        if total.startswith(PROBLEM_TAG):
            problems[key] += int(total[len(PROBLEM_TAG) :])
        else:
            totals.append((key, total))
    return totals, problems


def warnings(
    problems: Counter[str], since_start: Counter[str], value_field: str, key_field: str
) -> list[str]:
    """The DStream engine's warnings for a micro-batch's problems (after `since_start` took
    them in): Kafka values skipped or repaired, bad CSV rows."""
    lines = []
    kafka = {kind: problems[kind] for kind in KAFKA if problems[kind]}
    if kafka:
        lines.append(
            "kafka values skipped or repaired: "
            + ", ".join(f"{k}={v}" for k, v in kafka.items())
            + " (empty/null and oversize values are skipped; replaced = invalid UTF-8 "
            "decoded with U+FFFD; lost = gone to retention; since start: "
            + ", ".join(f"{k}={since_start[k]}" for k in KAFKA if since_start[k])
            + ")"
        )
    names = {"columns": "wrong field count", "value": f"{value_field} not a number",
             "key": f"{key_field} empty"}  # fmt: skip
    csv = {names[r]: problems[CSV_PREFIX + r] for r in CSV if problems[CSV_PREFIX + r]}
    if csv:
        since = sum(since_start[CSV_PREFIX + r] for r in CSV)
        lines.append(
            f"skipped {sum(csv.values())} bad CSV rows ("
            + ", ".join(f"{k}={v}" for k, v in csv.items())
            + f"; {since} since start)"
        )
    return lines
