"""The running totals as updateStateByKey keeps them: one state record per bucket of keys.

PySpark's updateStateByKey re-shuffles the whole state every batch (a Python cogroup of
the state with the batch) and calls the update function once per state record. With one
record per key that is several Python calls and two pickles per key per batch, so a
batch took time in proportion to the state, not to its input (docs/benchmarks.md).

Here a state record is (bucket, {key: total}): the keys hashed into `state_buckets`
buckets. A batch's counts are grouped by bucket on their side of the shuffle, the update
merges them into the bucket's dict (the job's update function runs once per key *of the
batch*), and what stays per state key is pickling dicts, which runs in C. `totals`
flattens the buckets back into (key, total) pairs for the sinks. state_buckets = 0 keeps
the layout of one record per key.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

Bucket = dict[str, Any]


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of a key: a hash that is the same in every process (unlike hash())."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % buckets


def by_bucket(pairs: Iterable[tuple[str, Any]], buckets: int) -> Iterator[tuple[int, Bucket]]:
    """One partition's (key, value) pairs as (bucket, {key: value}) records."""
    found: dict[int, Bucket] = {}
    for key, value in pairs:
        index = bucket_of(key, buckets)
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


def keep_totals(counts: Any, update: Any, buckets: int, initial: Any = None) -> tuple[Any, Any]:
    """The state DStream (to checkpoint) and its (key, total) pairs, for the sinks.

    `initial`: an RDD of (key, total) pairs a restored context starts from.
    """
    if not buckets:
        state = counts.updateStateByKey(update, initialRDD=initial)
        return state, state
    if initial is not None:
        initial = initial.mapPartitions(partial(by_bucket, buckets=buckets)).reduceByKey(
            merge_buckets
        )
    bucketed = counts.mapPartitions(partial(by_bucket, buckets=buckets))
    state = bucketed.updateStateByKey(partial(merge_bucket, update=update), initialRDD=initial)
    return state, state.flatMap(bucket_items)
