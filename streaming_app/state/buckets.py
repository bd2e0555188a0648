"""The running totals as updateStateByKey keeps them: one state record per bucket of keys.

The functions here run inside Spark's jobs on the executors (grouping, merging and the
update); `keep_totals` and `update_buckets` run on the driver to build the graph.

PySpark's updateStateByKey cogroups the whole state with the batch every batch, in
Python (every record tagged, combined into lists, passed out to the JVM and back, grouped)
and calls the update function once per state record. With one record per key that is
several Python calls and pickles per key per batch, so a batch took time in proportion
to the state, not to its input (docs/benchmarks.md).

Here a state record is (bucket, {key: total}): the keys hashed into `state_buckets`
buckets. A batch's counts are grouped by bucket on their side of the shuffle, the update
merges them into the bucket's dict (the job's update function runs once per key *of the
batch*), and what stays per state key is pickling dicts, which runs in C. `totals`
flattens the buckets back into (key, total) pairs for the sinks. state_buckets = 0 keeps
the layout of one record per key.

A bucket's record stays serialized between batches: its value is a `Bucket` tuple of
the packed {key: total} dict (marshal, or pickle for exact sums), the totals this batch
changed, the bucket's top keys for the console, its count of keys and sum of totals,
and what the batch added (the metrics' words). A bucket that no key of the batch
touches passes through as it is, without being unpacked, so an idle batch costs what the
number of buckets costs, not the keys;
the sinks read the changed totals, the tops and the counts without unpacking either
(state/view.py).

A batch reaches the state in one shuffle (batch_buckets): each partition's counts are
grouped by bucket where they were counted, and the bucket dicts are partitioned by
bucket. Partitioned like the state, the batch is merged with it without moving the state
(update_buckets), where PySpark's updateStateByKey would first reduce the batch by key (a
shuffle of every word) and then partition it by bucket (a second one). The state's merge
reads the shuffled dicts itself (merge_states), several per bucket, one from each
partition that counted the bucket's keys: reducing them first, in a Python pass of their
own, cost each state partition a second Python worker and a pickling of the batch to the
JVM and back. The batch's (key, value) pairs for the other sinks are its buckets' dicts
reduced (batch_pairs).
"""

from __future__ import annotations

import heapq
import marshal
import pickle
import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from streaming_app.jobs.text import update_count

Totals = dict[str, Any]
# The bucket of the keyed-sum job's (None, BadRows) record: never in the state.
NO_BUCKET = -1
_MARSHAL, _PICKLE = b"m", b"p"


class Bucket(NamedTuple):
    """A bucket of the state between batches (pickled as a plain tuple by Spark)."""

    packed: bytes  # the {key: total} dict, pack()ed
    changed: Totals | None  # the keys this batch gave a new total, with it
    top: list[tuple[str, Any]] | None  # the top keys by total (top_n > 0), rank order
    keys: int  # how many keys
    total: Any  # the sum of the totals (None while there is none)
    # What this batch added to the bucket: the sum of its values (words, for the word
    # count), None when the batch left the bucket alone. A record of a checkpoint
    # written before this field unpickles with None here (cloudpickle calls Bucket with
    # five values), or, under PySpark's namedtuple patch, as a five-field tuple of its
    # own class: read it through added_of.
    added: Any = None


def added_of(bucket: tuple[Any, ...]) -> Any:
    """A bucket's `added` (None for a record of a checkpoint that did not keep it)."""
    return bucket[5] if len(bucket) > 5 else None


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of a key: a hash that is the same in every process (unlike hash())."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % buckets


def rank(pair: tuple[str, Any]) -> tuple[Any, str]:
    """Sort key of the top keys: highest total first, then by key."""
    return -pair[1], pair[0]


def top(pairs: Iterable[tuple[str, Any]], n: int) -> list[tuple[str, Any]]:
    """The `n` first of `pairs` by `rank`, without sorting them all."""
    return heapq.nsmallest(n, pairs, key=rank)


def pack(totals: Totals) -> bytes:
    """A bucket's totals as bytes: marshal (several times faster), pickle for Decimals."""
    try:
        return _MARSHAL + marshal.dumps(totals)
    except ValueError:  # exact sums (Decimal) are not marshallable
        return _PICKLE + pickle.dumps(totals, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(packed: bytes) -> Totals:
    """Inverse of pack (within one Python version, as the checkpoint is)."""
    body = memoryview(packed)[1:]
    totals: Totals = marshal.loads(body) if packed[:1] == _MARSHAL else pickle.loads(body)
    return totals


def by_bucket(
    pairs: Iterable[tuple[str | None, Any]], buckets: int
) -> Iterator[tuple[int, Totals]]:
    """One partition's (key, value) pairs as (bucket, {key: value}) records.

    The key None (the keyed-sum job's bad rows) goes to NO_BUCKET. bucket_of inlined,
    into a list indexed by bucket: a call and a dict lookup less per key, about half the
    time of a read task's bucketing (48,000 keys: 11-17 ms against 22-24). A bucket's dict
    is made when its first key comes, so many buckets cost no more than the keys need.
    """
    found: list[dict[Any, Any] | None] = [None] * buckets
    bad: dict[Any, Any] = {}
    crc32 = zlib.crc32
    for key, value in pairs:
        if key is None:
            bad[key] = value
            continue
        index = crc32(key.encode("utf-8", "surrogatepass")) % buckets
        into = found[index]
        if into is None:
            into = found[index] = {}
        into[key] = value
    records = [(index, into) for index, into in enumerate(found) if into is not None]
    if bad:
        records.append((NO_BUCKET, bad))
    return iter(records)


def top_of(
    totals: Totals, before: list[tuple[str, Any]] | None, changed: Totals, top_n: int
) -> list[tuple[str, Any]] | None:
    """The top `top_n` keys of a bucket after a batch (None when no console needs them).

    When no key of the old top went down, the new top is among the old top and the keys
    the batch changed: every other key was at most the old top's last and did not move.
    Otherwise (an exact sum that fell) the whole bucket is ranked.
    """
    if not top_n:
        return None
    if before is not None and all(changed.get(k, v) >= v for k, v in before):
        candidates = dict(before)
        if len(before) == top_n:
            # Only a changed total at least the old top's last can enter the top.
            least = before[-1][1]
            candidates.update((k, v) for k, v in changed.items() if v >= least)
        else:
            candidates.update(changed)
        return top(candidates.items(), top_n)
    return top(totals.items(), top_n)


def _add_all(update: Callable[[Any, Any], Any], values: Iterable[Any], total: Any) -> Any:
    """A running sum through the job's update function (None until there is a value)."""
    added = update(values, total)
    return total if added is None else added


def new_bucket(totals: Totals, update: Callable[[Any, Any], Any], top_n: int) -> Bucket:
    """A bucket of an initial state (a restored snapshot's totals)."""
    return Bucket(
        pack(totals),
        None,
        top_of(totals, None, {}, top_n),
        len(totals),
        _add_all(update, list(totals.values()), None),
    )


def merge_bucket(
    new: Iterable[Totals],
    state: Bucket | None,
    update: Callable[[Any, Any], Any],
    top_n: int = 0,
) -> Bucket | None:
    """A bucket after the batch: each new value through the job's update (one key's).

    `new` holds the batch's dicts for the bucket, one per partition that counted its keys
    (or one, reduced): the update runs once per key of each, so a key counted in two
    partitions is added twice, as a sum's update would add the two values at once. The
    rest of the bucket is unpacked and packed again but not visited. A key the update
    drops (None) is removed and not listed as changed: neither job drops a key that has a
    total. A bucket with no key left is dropped (None).
    """
    totals: Totals = unpack(state.packed) if state is not None else {}
    changed: Totals = {}
    values: list[Any] = []
    if update is update_count:
        # The word count's update inlined (the same result): a call per key costs more
        # than the addition.
        get = totals.get
        for part in new:
            for key, value in part.items():
                before = get(key)
                if before is not None:
                    totals[key] = changed[key] = before + value
                elif value:
                    totals[key] = changed[key] = value
            values.append(sum(part.values()))
    else:
        for part in new:
            for key, value in part.items():
                total = update((value,), totals.get(key))
                values.append(value)
                if total is None:
                    totals.pop(key, None)
                else:
                    totals[key] = changed[key] = total
    if not totals:
        return None
    return Bucket(
        pack(totals),
        changed or None,
        top_of(totals, state.top if state is not None else None, changed, top_n),
        len(totals),
        _add_all(update, values, state.total if state is not None else None),
        _add_all(update, values, None),
    )


def passed_through(state: Bucket) -> Bucket:
    """A bucket no key of the batch touched: as it was, without the last batch's changes."""
    if state.changed is None and added_of(state) is None:
        return state
    # Not _replace: a record of an older checkpoint may be a five-field tuple (added_of).
    return Bucket(state.packed, None, state.top, state.keys, state.total)


def bucket_items(record: tuple[int, Bucket]) -> Iterable[tuple[str, Any]]:
    """The (key, total) pairs of a bucket (unpacks it)."""
    return unpack(record[1].packed).items()


def merge_buckets(a: Totals, b: Totals) -> Totals:
    """Two parts of one bucket with disjoint keys (the initial state's partitions)."""
    a.update(b)
    return a


def merge_parts(
    records: Iterable[tuple[int, Totals]], reduce: Callable[[Any, Any], Any]
) -> Iterator[tuple[int, tuple[Totals]]]:
    """A shuffled partition of a batch's bucket dicts: one record per bucket, values reduced.

    Each record is (bucket, (dict,)): the tuple tells a batch's part from a state record
    where the two meet (merge_states). The dicts were unpickled for this task alone.
    """
    merged: dict[int, Totals] = {}
    for index, values in records:
        into = merged.get(index)
        if into is None:
            merged[index] = values
            continue
        for key, value in values.items():
            into[key] = reduce(into[key], value) if key in into else value
    return ((index, (values,)) for index, values in merged.items())


def batch_items(record: tuple[int, tuple[Totals]]) -> Iterable[tuple[str, Any]]:
    """The (key, value) pairs of a batch's bucket."""
    return record[1][0].items()


def batch_buckets(pairs: Any, buckets: int, partitions: int) -> Any:
    """A DStream of each partition's (key, value) pairs as (bucket, {key: value}) records,
    one per bucket and counting partition, not yet reduced (merge_states reduces them).

    Its RDDs are partitioned by bucket into `partitions` (PySpark's portable_hash).
    """
    bucketed = pairs.mapPartitions(partial(by_bucket, buckets=buckets))
    return bucketed.partitionBy(partitions)


def batch_pairs(batch: Any, reduce: Any) -> Any:
    """The (key, value) pairs of batch_buckets' DStream, one per key (for the other sinks)."""
    merged = batch.mapPartitions(partial(merge_parts, reduce=reduce), preservesPartitioning=True)
    return merged.flatMap(batch_items)


def merge_states(
    records: Iterable[tuple[int, Any]], update: Callable[[Any, Any], Any], top_n: int = 0
) -> Iterator[tuple[int, Bucket]]:
    """A partition of the state and the batch together: the state after the batch.

    The batch's records are the shuffled bucket dicts (batch_buckets), several to a
    bucket; a context built before they came unreduced hands them over reduced, as
    merge_parts' (bucket, (dict,)) records. Only the buckets the batch has keys for are
    unpacked; the others pass through.
    """
    states: dict[int, Bucket] = {}
    parts: dict[int, list[Totals]] = {}
    for index, value in records:
        kind = type(value)
        if kind is dict:  # a part of the batch (batch_buckets)
            parts.setdefault(index, []).append(value)
        elif kind is tuple:  # the batch's part reduced (merge_parts, an older graph)
            parts.setdefault(index, []).append(value[0])
        else:
            states[index] = value
    parts.pop(NO_BUCKET, None)
    for index, state in states.items():
        if index not in parts:
            yield index, passed_through(state)
    for index, new in parts.items():
        merged = merge_bucket(new, states.get(index), update, top_n)
        if merged is not None:
            yield index, merged


def next_state(
    t: datetime, state: Any, batch: Any, partitions: int, update: Any, top_n: int = 0
) -> Any:
    """The state RDD after a batch RDD (PythonStateDStream's function).

    The state comes back partitioned as this function left it, so the union of the two
    is partition-aware: partition i holds the state's and the batch's partition i, and
    nothing moves. A state from another driver process (a checkpoint) has a partitioner
    that differs in name only; then both are partitioned anew, once.
    """
    both = batch if state is None else state.union(batch)
    if both.getNumPartitions() != partitions:
        both = both.partitionBy(partitions)
    return both.mapPartitions(
        partial(merge_states, update=update, top_n=top_n), preservesPartitioning=True
    )


def update_buckets(
    batch: Any, update: Any, partitions: int, top_n: int = 0, initial: Any = None
) -> Any:
    """updateStateByKey of batch_buckets' DStream, with next_state as the reduce function.

    `update` is the job's function of one key (update_count, update_sum).
    """
    from pyspark.streaming import DStream
    from pyspark.streaming.util import TransformFunction

    sc = batch._sc
    reduce = TransformFunction(  # type: ignore[no-untyped-call]
        sc,
        partial(next_state, partitions=partitions, update=update, top_n=top_n),
        sc.serializer,
        batch._jrdd_deserializer,
    )
    if initial is None:
        jstream = sc._jvm.PythonStateDStream(batch._jdstream.dstream(), reduce)
    else:
        initial = initial._reserialize(batch._jrdd_deserializer)
        jstream = sc._jvm.PythonStateDStream(batch._jdstream.dstream(), reduce, initial._jrdd)
    return DStream(jstream.asJavaDStream(), batch._ssc, sc.serializer)


def keep_totals(
    counts: Any,
    batch: Any,
    update: Any,
    buckets: int,
    partitions: int,
    top_n: int = 0,
    initial: Any = None,
) -> Any:
    """The state DStream (to checkpoint, and for the sinks through a StateView).

    counts: the batch's (key, value) pairs; batch: batch_buckets of them (buckets > 0).
    top_n: how many top keys each bucket keeps for the console (0: none).
    `initial`: an RDD of (key, total) pairs a restored context starts from.
    """
    if not buckets:
        return counts.updateStateByKey(update, partitions, initialRDD=initial)
    if initial is not None:
        initial = (
            initial.mapPartitions(partial(by_bucket, buckets=buckets))
            .reduceByKey(merge_buckets, partitions)
            .mapValues(partial(new_bucket, update=update, top_n=top_n))
        )
    return update_buckets(batch, update, partitions, top_n, initial)
