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

A batch reaches the state in one shuffle (batch_buckets): each partition's counts are
grouped by bucket where they were counted, the bucket dicts are partitioned by bucket,
and each bucket's dicts are merged into one. Partitioned like the state, the batch is
merged with it without moving the state (update_buckets), where PySpark's
updateStateByKey would first reduce the batch by key (a shuffle of every word) and then
partition it by bucket (a second one). The batch's (key, value) pairs for the other
sinks are the merged buckets' items.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

Bucket = dict[str, Any]
# The bucket of the keyed-sum job's (None, BadRows) record: never in the state.
NO_BUCKET = -1


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of a key: a hash that is the same in every process (unlike hash())."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % buckets


def by_bucket(
    pairs: Iterable[tuple[str | None, Any]], buckets: int
) -> Iterator[tuple[int, Bucket]]:
    """One partition's (key, value) pairs as (bucket, {key: value}) records.

    The key None (the keyed-sum job's bad rows) goes to NO_BUCKET.
    """
    found: dict[int, dict[Any, Any]] = {}
    for key, value in pairs:
        index = bucket_of(key, buckets) if key is not None else NO_BUCKET
        into = found.get(index)
        if into is None:
            into = found[index] = {}
        into[key] = value
    return iter(found.items())


def merge_bucket(
    new: Iterable[Bucket], state: Bucket | None, update: Callable[[Any, Any], Any]
) -> Bucket | None:
    """updateStateByKey function of a bucket: each new value through the job's update.

    `state` was unpickled for this task alone, so it is updated in place. A bucket with
    no key left is dropped (None), as the job's update drops a key.
    """
    merged: Bucket = state if state is not None else {}
    for values in new:
        for key, value in values.items():
            total = update((value,), merged.get(key))
            if total is None:
                merged.pop(key, None)
            else:
                merged[key] = total
    return merged or None


def bucket_items(record: tuple[int, Bucket]) -> Iterable[tuple[str, Any]]:
    """The (key, total) pairs of a bucket."""
    return record[1].items()


def merge_buckets(a: Bucket, b: Bucket) -> Bucket:
    """Two parts of one bucket with disjoint keys (the initial state's partitions)."""
    a.update(b)
    return a


def merge_parts(
    records: Iterable[tuple[int, Bucket]], reduce: Callable[[Any, Any], Any]
) -> Iterator[tuple[int, tuple[Bucket]]]:
    """A shuffled partition of a batch's bucket dicts: one record per bucket, values reduced.

    Each record is (bucket, (dict,)): the tuple tells a batch's part from a state record
    where the two meet (merge_states). The dicts were unpickled for this task alone.
    """
    merged: dict[int, Bucket] = {}
    for index, values in records:
        into = merged.get(index)
        if into is None:
            merged[index] = values
            continue
        for key, value in values.items():
            into[key] = reduce(into[key], value) if key in into else value
    return ((index, (values,)) for index, values in merged.items())


def batch_items(record: tuple[int, tuple[Bucket]]) -> Iterable[tuple[str, Any]]:
    """The (key, value) pairs of a batch's bucket."""
    return record[1][0].items()


def batch_buckets(pairs: Any, buckets: int, reduce: Any, partitions: int) -> Any:
    """A DStream of each partition's (key, value) pairs as one merged record per bucket.

    Its RDDs are partitioned by bucket into `partitions` (PySpark's portable_hash).
    """
    bucketed = pairs.mapPartitions(partial(by_bucket, buckets=buckets))
    return bucketed.partitionBy(partitions).mapPartitions(
        partial(merge_parts, reduce=reduce), preservesPartitioning=True
    )


def merge_states(
    records: Iterable[tuple[int, Any]], update: Callable[[Any, Any], Any]
) -> Iterator[tuple[int, Bucket]]:
    """A partition of the state and the batch together: the state after the batch."""
    states: dict[int, Bucket] = {}
    parts: dict[int, list[Bucket]] = {}
    for index, value in records:
        if type(value) is tuple:  # the batch's part (merge_parts)
            parts.setdefault(index, []).append(value[0])
        else:
            states[index] = value
    parts.pop(NO_BUCKET, None)
    for index in states.keys() | parts.keys():
        merged = merge_bucket(parts.get(index, ()), states.get(index), update)
        if merged is not None:
            yield index, merged


def next_state(t: datetime, state: Any, batch: Any, partitions: int, update: Any) -> Any:
    """The state RDD after a batch RDD (PythonStateDStream's function).

    The state comes back partitioned as this function left it, so the union of the two
    is partition-aware: partition i holds the state's and the batch's partition i, and
    nothing moves. A state from another driver process (a checkpoint) has a partitioner
    that differs in name only; then both are partitioned anew, once.
    """
    both = batch if state is None else state.union(batch)
    if both.getNumPartitions() != partitions:
        both = both.partitionBy(partitions)
    return both.mapPartitions(partial(merge_states, update=update), preservesPartitioning=True)


def update_buckets(batch: Any, update: Any, partitions: int, initial: Any = None) -> Any:
    """updateStateByKey of batch_buckets' DStream, with next_state as the reduce function.

    `update` is the job's function of one key (update_count, update_sum).
    """
    from pyspark.streaming import DStream
    from pyspark.streaming.util import TransformFunction

    sc = batch._sc
    reduce = TransformFunction(  # type: ignore[no-untyped-call]
        sc,
        partial(next_state, partitions=partitions, update=update),
        sc.serializer,
        batch._jrdd_deserializer,
    )
    if initial is None:
        jstream = sc._jvm.PythonStateDStream(batch._jdstream.dstream(), reduce)
    else:
        initial = initial._reserialize(batch._jrdd_deserializer)
        jstream = sc._jvm.PythonStateDStream(batch._jdstream.dstream(), reduce, initial._jrdd)
    return DStream(jstream.asJavaDStream(), batch._ssc, sc.serializer)


def bucket_totals(rdd: Any) -> Any:
    """The (key, total) pairs of an RDD of state buckets."""
    return rdd.flatMap(bucket_items)


def same_rdd(rdd: Any) -> Any:
    """The (key, total) pairs of a state of one record per key: its RDD as it is."""
    return rdd


def keep_totals(
    counts: Any, batch: Any, update: Any, buckets: int, partitions: int, initial: Any = None
) -> tuple[Any, Callable[[Any], Any]]:
    """The state DStream (to checkpoint, and for the sinks) and its RDDs' totals function.

    The function gives an RDD of the state as (key, total) pairs. A sink applies it in
    its own job, so the pairs go from the state's cached buckets straight into the
    sink's Python pass; a DStream of the pairs would pickle every pair in a pass of its
    own, for each sink to unpickle again.

    counts: the batch's (key, value) pairs; batch: batch_buckets of them (buckets > 0).
    `initial`: an RDD of (key, total) pairs a restored context starts from.
    """
    if not buckets:
        return counts.updateStateByKey(update, partitions, initialRDD=initial), same_rdd
    if initial is not None:
        initial = initial.mapPartitions(partial(by_bucket, buckets=buckets)).reduceByKey(
            merge_buckets, partitions
        )
    return update_buckets(batch, update, partitions, initial), bucket_totals
