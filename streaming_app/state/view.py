"""How the sinks and the snapshots read a state RDD: totals, changes, top keys, counts.

Runs on the driver, in the output operations. With state buckets only `totals` unpacks
the buckets (an RDD, for the outputs of every total: a files base, a snapshot). The
changes, the tops and the counts travel in the bucket records (state/buckets.py): one
small job per batch collects them for every sink together (the batch's digest), so they
cost what the buckets and the batch cost, not the keys, and one Spark job however many
sinks read them (a job costs tens of milliseconds on two cores, even an empty one). With
one state record per key (state_buckets = 0) the state does not know what changed:
`changed` is None, and the top and the counts scan the whole state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from streaming_app.state.buckets import added_of, bucket_items, rank, top

if TYPE_CHECKING:
    from pyspark import RDD


class Digest(NamedTuple):
    """What the sinks read of a batch's state besides the totals, on the driver."""

    changed: list[tuple[str, Any]] | None  # the totals the batch changed (None: not asked)
    tops: list[tuple[str, Any]]  # every bucket's top keys
    keys: int
    total: Any
    added: Any = None  # what the batch added to the totals (its words), None if nothing


def _bucket_digest(record: tuple[int, Any]) -> tuple[Any, Any, int, Any, Any]:
    bucket = record[1]
    return bucket.changed, bucket.top, bucket.keys, bucket.total, added_of(bucket)


def _without_changes(record: tuple[int, Any]) -> tuple[Any, Any, int, Any, Any]:
    bucket = record[1]
    return None, bucket.top, bucket.keys, bucket.total, added_of(bucket)


# The newest batch's digest: ((application, state RDD id), digest). Output operations of
# one batch run one after the other on the driver, and each gets the same state RDD.
_last: list[tuple[tuple[str, int], Digest]] = []


# Lines per element of `lines`: few elements, none large (a bucket of a huge state, or a
# state in few buckets, is written as several).
LINES_PER_ELEMENT = 20_000


def _bucket_lines(line: Callable[[tuple[str, Any]], str], record: tuple[int, Any]) -> Iterator[str]:
    items = iter(bucket_items(record))
    while chunk := list(islice(items, LINES_PER_ELEMENT)):
        yield "\n".join(map(line, chunk))


def _key_figures(pair: tuple[str, Any]) -> tuple[int, Any]:
    return 1, pair[1]


@dataclass(frozen=True)
class StateView:
    """The reading functions of one state layout. Pickled into the checkpoint: plain fields."""

    bucketed: bool
    add: Callable[[Any, Any], Any]  # the job's reduce function: sums of totals
    changes: bool = True  # a sink reads the changed totals (files, postgres)

    def totals(self, rdd: RDD[Any]) -> RDD[tuple[str, Any]]:
        """Every (key, total) of the state, as an RDD (unpacks every bucket)."""
        return rdd.flatMap(bucket_items) if self.bucketed else rdd

    def lines(self, rdd: RDD[Any], line: Callable[[tuple[str, Any]], str]) -> RDD[str]:
        """Every total formatted by `line`, for `saveAsTextFile`: with buckets one element
        per bucket (one per LINES_PER_ELEMENT of its keys), its lines joined.
        saveAsTextFile writes an element and a newline, so the files hold the same lines
        as one element per key, and Python hands the JVM one record per bucket instead of
        one per key."""
        if not self.bucketed:
            return rdd.map(line)
        return rdd.flatMap(partial(_bucket_lines, line))

    def digest(self, rdd: RDD[Any]) -> Digest:
        """The batch's digest: one job for the first sink of a batch, then kept."""
        assert self.bucketed
        which = (str(rdd.context.applicationId), rdd.id())
        if _last and _last[0][0] == which:
            return _last[0][1]
        parts = rdd.map(_bucket_digest if self.changes else _without_changes).collect()
        changed: list[tuple[str, Any]] | None = [] if self.changes else None
        tops: list[tuple[str, Any]] = []
        keys, total, added = 0, None, None
        for part_changed, part_top, part_keys, part_total, part_added in parts:
            if part_changed and changed is not None:
                changed.extend(part_changed.items())
            if part_top:
                tops.extend(part_top)
            keys += part_keys
            if part_total is not None:
                total = part_total if total is None else self.add(total, part_total)
            if part_added is not None:
                added = part_added if added is None else self.add(added, part_added)
        found = Digest(changed, tops, keys, 0 if total is None else total, added)
        _last[:] = [(which, found)]
        return found

    def changed(self, rdd: RDD[Any]) -> list[tuple[str, Any]] | None:
        """The (key, total) pairs this batch changed; None when the layout cannot tell."""
        return self.digest(rdd).changed if self.bucketed else None

    def top(self, rdd: RDD[Any], n: int) -> list[tuple[str, Any]]:
        """The n keys with the highest totals (ties by key)."""
        if not self.bucketed:
            return rdd.takeOrdered(n, key=rank)
        tops = self.digest(rdd).tops
        if not tops and self.digest(rdd).keys:  # the state kept no tops (no console)
            return self.totals(rdd).takeOrdered(n, key=rank)
        return top(tops, n)

    def figures(self, rdd: RDD[Any]) -> tuple[int, Any]:
        """How many keys the state holds and the sum of their totals (0, 0 when empty)."""
        if self.bucketed:
            found = self.digest(rdd)
            return found.keys, found.total
        add = self.add

        def both(a: tuple[int, Any], b: tuple[int, Any]) -> tuple[int, Any]:
            if a[1] is None or b[1] is None:
                return a[0] + b[0], a[1] if b[1] is None else b[1]
            return a[0] + b[0], add(a[1], b[1])

        keys, total = rdd.map(_key_figures).fold((0, None), both)
        return keys, 0 if total is None else total
