"""How the sinks and the snapshots read a state RDD: totals, changes, top keys, counts.

Runs on the driver, in the output operations; what it returns of the keys is an RDD,
which the sinks' executors write (`totals`, `lines`: every total, for a files base, a
snapshot or a table replaced; `changed`, `changed_lines`: the totals the batch changed,
for a files delta or the postgres sink). The driver receives only the batch's digest:
per partition its count of changed keys, its top keys, its count of keys, its sum and
what the batch added (state/buckets.py keeps them in each bucket record, and each
partition's task sums its buckets'), collected by one small job for every sink together,
so it is bounded by the partitions and `top_n`, never by the keys a batch changed, and
one Spark job however many sinks read it (a job costs tens of milliseconds on two cores,
even an empty one). The files sink writes through `writing`, whose tasks bring the
digest back with their counts: a batch of the files and console sinks is then one job.
With one state record per key
(state_buckets = 0) the state does not know what changed: `changed` is None, and the
top and the counts scan the whole state (on the executors: `takeOrdered`, `fold`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from streaming_app.state.buckets import added_of, bucket_items, rank, top

if TYPE_CHECKING:
    from pyspark import RDD


# Executor side: writes one partition's lines (partition index, lines), yields its count.
PartWriter = Callable[[int, Iterable[str]], Iterator[int]]


class Digest(NamedTuple):
    """What the sinks read of a batch's state besides the totals, on the driver."""

    changed: int | None  # how many totals the batch changed (None: not asked)
    tops: list[tuple[str, Any]]  # every partition's top keys
    keys: int
    total: Any
    added: Any = None  # what the batch added to the totals (its words), None if nothing


def _sum(add: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else add(a, b)


# What the digest reads of a bucket: its count of changed totals, top keys, count of keys,
# sum of totals and what the batch added.
Figures = tuple[int, list[tuple[str, Any]] | None, int, Any, Any]


def _figures(bucket: Any) -> Figures:
    changed = len(bucket.changed) if bucket.changed else 0
    return changed, bucket.top, bucket.keys, bucket.total, added_of(bucket)


def _partition_digest(
    add: Callable[[Any, Any], Any], changes: bool, records: Iterable[tuple[int, Any]]
) -> Iterator[tuple[int | None, list[tuple[str, Any]], int, Any, Any]]:
    """Executor side: one partition's buckets summed into one digest record."""
    yield _summed(add, changes, (_figures(bucket) for _, bucket in records))


def _summed(
    add: Callable[[Any, Any], Any], changes: bool, buckets: Iterable[Figures]
) -> tuple[int | None, list[tuple[str, Any]], int, Any, Any]:
    """The buckets' figures summed, the top keys the partition's top (each bucket keeps its
    top `top_n`; a bucket whose top is shorter than its keys was cut at `top_n`, so the
    partition's top is as long)."""
    changed: int | None = 0 if changes else None
    tops: list[tuple[str, Any]] = []
    keys, total, added, cut = 0, None, None, 0
    for bucket_changed, bucket_top, bucket_keys, bucket_total, bucket_added in buckets:
        if changed is not None:
            changed += bucket_changed
        if bucket_top:
            tops.extend(bucket_top)
            if len(bucket_top) < bucket_keys:
                cut = len(bucket_top)
        keys += bucket_keys
        total = _sum(add, total, bucket_total)
        added = _sum(add, added, bucket_added)
    return changed, top(tops, cut) if cut else tops, keys, total, added


def _write_and_digest(
    add: Callable[[Any, Any], Any],
    changes: bool,
    lines_of: Callable[[tuple[int, Any]], Iterator[str]],
    write: PartWriter,
    index: int,
    records: Iterable[tuple[int, Any]],
) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """Executor side: one partition's lines written by `write`, and its digest record.

    Each bucket goes on once its lines are written; only its figures are kept."""
    kept: list[Figures] = []

    def lines() -> Iterator[str]:
        for record in records:
            kept.append(_figures(record[1]))
            yield from lines_of(record)

    written = sum(write(index, lines()))
    yield written, _summed(add, changes, kept)


def _which(rdd: RDD[Any]) -> tuple[str, int]:
    """The key of a state RDD's digest: its application and RDD id."""
    return str(rdd.context.applicationId), rdd.id()


# The newest batch's digest: ((application, state RDD id), digest). Output operations of
# one batch run one after the other on the driver, and each gets the same state RDD.
_last: list[tuple[tuple[str, int], Digest]] = []


# Lines per element of `lines`: few elements, none large (a bucket of a huge state, or a
# state in few buckets, is written as several).
LINES_PER_ELEMENT = 20_000


def _joined(
    line: Callable[[tuple[str, Any]], str], pairs: Iterable[tuple[str, Any]]
) -> Iterator[str]:
    items = iter(pairs)
    while chunk := list(islice(items, LINES_PER_ELEMENT)):
        yield "\n".join(map(line, chunk))


def _bucket_lines(line: Callable[[tuple[str, Any]], str], record: tuple[int, Any]) -> Iterator[str]:
    return _joined(line, bucket_items(record))


def _changed_items(record: tuple[int, Any]) -> Iterator[tuple[str, Any]]:
    changed = record[1].changed
    return iter(changed.items()) if changed else iter(())


def _changed_lines(
    line: Callable[[tuple[str, Any]], str], record: tuple[int, Any]
) -> Iterator[str]:
    return _joined(line, _changed_items(record))


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
        """The batch's digest: one job for the first sink of a batch (none when a sink
        wrote through `writing`, whose job brought it), then kept."""
        assert self.bucketed
        which = _which(rdd)
        if _last and _last[0][0] == which:
            return _last[0][1]
        digest = partial(_partition_digest, self.add, self.changes)
        found = self._combined(rdd.mapPartitions(digest).collect())  # one record a partition
        _last[:] = [(which, found)]
        return found

    def _combined(self, parts: Iterable[tuple[Any, ...]]) -> Digest:
        """The partitions' digest records summed into the batch's."""
        changed: int | None = 0 if self.changes else None
        tops: list[tuple[str, Any]] = []
        keys, total, added = 0, None, None
        for part_changed, part_top, part_keys, part_total, part_added in parts:
            if part_changed and changed is not None:
                changed += part_changed
            tops.extend(part_top)
            keys += part_keys
            total = _sum(self.add, total, part_total)
            added = _sum(self.add, added, part_added)
        return Digest(changed, tops, keys, 0 if total is None else total, added)

    def writing(
        self, rdd: RDD[Any], line: Callable[[tuple[str, Any]], str], changed: bool
    ) -> Callable[[PartWriter], None] | None:
        """A job that writes the state's lines (`changed`: the totals the batch changed,
        as `changed_lines`; else every total, as `lines`) by a part writer on the
        executors and brings the batch's digest back from the same tasks, so that the
        sinks after it (the console's top, the metrics' figures) run no job of their own:
        a Spark job costs tens of milliseconds of a batch even when it is small. None
        without buckets (no digest), or when the layout cannot tell what changed."""
        if not self.bucketed or (changed and not self.changes):
            return None
        lines_of = partial(_changed_lines if changed else _bucket_lines, line)

        def run(write: PartWriter) -> None:
            task = partial(_write_and_digest, self.add, self.changes, lines_of, write)
            results = rdd.mapPartitionsWithIndex(task).collect()  # one record a partition
            _last[:] = [(_which(rdd), self._combined(digest for _, digest in results))]

        return run

    def changed(self, rdd: RDD[Any]) -> RDD[tuple[str, Any]] | None:
        """The (key, total) pairs this batch changed, as an RDD (the buckets' changes, on
        the executors); None when the layout cannot tell."""
        return rdd.flatMap(_changed_items) if self.bucketed and self.changes else None

    def changed_lines(
        self, rdd: RDD[Any], line: Callable[[tuple[str, Any]], str]
    ) -> RDD[str] | None:
        """The changed totals formatted by `line`, as `lines` gives every total (an element
        per bucket, its lines joined); None when the layout cannot tell."""
        if not (self.bucketed and self.changes):
            return None
        return rdd.flatMap(partial(_changed_lines, line))

    def changed_count(self, rdd: RDD[Any]) -> int | None:
        """How many totals this batch changed (the digest's); None when it cannot tell."""
        return self.digest(rdd).changed if self.bucketed and self.changes else None

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
