"""What a micro-batch's sources skipped or repaired, counted on the executors for the driver.

No Spark needed. The Kafka source adds a `problems` column to its rows (its read counts,
`empty=2 oversize=1`, on one row a range); the keyed-sum job's parsing counts its bad CSV
rows, and values beyond the state's decimal type. Each partition adds its counts to one
Spark accumulator of the query (`ProblemCounts`); the driver reads it after the
micro-batch's output ran, takes what it saw before off (`since`) and warns with the
DStream engine's lines. The counts never enter the state: the totals stay exactly the
input's. A task that Spark retries adds its counts again (a warning may overstate, never
a total).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from streaming_app.common.per_batch import remember

KAFKA = ("empty", "oversize", "replaced", "lost")  # the Kafka read counts that are warned
CSV = ("columns", "value", "key", "range")  # BadRows' reasons (range: not exact in the state)
CSV_PREFIX = "csv-"
# Not a problem: the words a partition counted (the word count), for the metrics.
WORDS = "words"


class ProblemCounts:
    """Spark's AccumulatorParam for a Counter of problem kinds (duck-typed: no Spark import)."""

    def zero(self, value: Counter[str]) -> Counter[str]:
        """An empty count."""
        return Counter()

    def addInPlace(self, total: Counter[str], more: Counter[str]) -> Counter[str]:  # noqa: N802 (Spark's name)
        """Add `more` into `total`."""
        total.update(more)
        return total


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


# Micro-batch id -> the words it counted, from the foreachBatch function to the listener.
_BATCH_WORDS: dict[int, int] = {}


def note_words(batch_id: int, found: Counter[str]) -> None:
    """Keep what a micro-batch counted (`since`'s result) for its metrics record."""
    remember(_BATCH_WORDS, batch_id, found[WORDS])


def batch_words(batch_id: int) -> int | None:
    """The words micro-batch `batch_id` counted (None if not noted); forgotten once asked."""
    return _BATCH_WORDS.pop(batch_id, None)


def by_reason(found: Counter[str]) -> dict[str, int]:
    """A micro-batch's problems as the metrics' reasons (`oversize`, `csv_value`, ...)."""
    kafka = {kind: found[kind] for kind in KAFKA}
    return kafka | {f"csv_{reason}": found[CSV_PREFIX + reason] for reason in CSV}


def since(now: Counter[str], before: Counter[str]) -> Counter[str]:
    """What the accumulator gained since the driver last read it: one micro-batch's counts."""
    gained = {kind: count - before[kind] for kind, count in now.items()}
    return Counter({kind: count for kind, count in gained.items() if count > 0})


def warnings(
    problems: Counter[str],
    since_start: Counter[str],
    value_field: str,
    key_field: str,
    value_type: str = "",
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
             "key": f"{key_field} empty",
             "range": f"{value_field} not exact in {value_type or 'the state'}"}  # fmt: skip
    csv = {names[r]: problems[CSV_PREFIX + r] for r in CSV if problems[CSV_PREFIX + r]}
    if csv:
        total = sum(since_start[CSV_PREFIX + r] for r in CSV)
        lines.append(
            f"skipped {sum(csv.values())} bad CSV rows ("
            + ", ".join(f"{k}={v}" for k, v in csv.items())
            + f"; {total} since start)"
        )
    return lines
