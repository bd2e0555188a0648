"""The bucketed state: the same totals as one state record per key, batch after batch."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from decimal import Decimal
from functools import partial
from typing import Any

from streaming_app.jobs.keyed import BadRows, add_sums, update_sum
from streaming_app.jobs.text import add_counts, update_count
from streaming_app.state.buckets import (
    NO_BUCKET,
    batch_items,
    bucket_items,
    bucket_of,
    by_bucket,
    merge_bucket,
    merge_buckets,
    merge_parts,
    merge_states,
)


def test_bucket_of_is_stable_and_in_range() -> None:
    # zlib.crc32, not hash(): the same in every worker process and every run.
    assert bucket_of("spark", 64) == zlib.crc32(b"spark") % 64
    assert [bucket_of(w, 8) for w in ("a", "b", "café", "\udcff")] == [
        bucket_of(w, 8) for w in ("a", "b", "café", "\udcff")
    ]
    assert all(0 <= bucket_of(f"w{i}", 7) < 7 for i in range(1000))
    assert len({bucket_of(f"w{i}", 16) for i in range(1000)}) == 16


def test_by_bucket_groups_a_partition_without_losing_a_pair() -> None:
    pairs = [(f"w{i}", i) for i in range(500)]
    records = list(by_bucket(pairs, 16))
    assert len({b for b, _ in records}) == len(records)  # one record per bucket
    flat = [pair for record in records for pair in bucket_items(record)]
    assert sorted(flat) == sorted(pairs)
    assert all(bucket_of(k, 16) == b for b, d in records for k in d)


def _per_key(batches: list[Counter[str]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for batch in batches:
        for key in set(totals) | set(batch):
            new = [batch[key]] if key in batch else []
            total = update_count(new, totals.get(key))
            if total is None:
                totals.pop(key, None)
            else:
                totals[key] = total
    return totals


def test_merged_buckets_equal_the_per_key_totals_over_many_batches() -> None:
    rng = random.Random(7)
    batches = [Counter(rng.choices([f"w{i}" for i in range(300)], k=200)) for _ in range(12)]
    buckets = 8
    state: dict[int, dict[str, int]] = {}
    for batch in batches:
        # Two partitions of the batch, as reduceByKey leaves them.
        items = list(batch.items())
        parts = [list(by_bucket(items[::2], buckets)), list(by_bucket(items[1::2], buckets))]
        new: dict[int, list[dict[str, int]]] = {}
        for part in parts:
            for index, values in part:
                new.setdefault(index, []).append(values)
        for index in set(state) | set(new):
            merged = merge_bucket(new.get(index, []), state.get(index), update_count)
            if merged is None:
                state.pop(index, None)
            else:
                state[index] = merged
    flat = {k: v for record in state.items() for k, v in bucket_items(record)}
    assert flat == _per_key(batches)


def test_a_key_whose_update_drops_it_leaves_the_bucket_and_an_empty_bucket_goes() -> None:
    def drop_at_zero(new: tuple[int, ...], total: int | None) -> int | None:
        result = (total or 0) + sum(new)
        return result or None

    assert merge_bucket([{"a": -2}], {"a": 2, "b": 1}, drop_at_zero) == {"b": 1}
    assert merge_bucket([{"a": -2}], {"a": 2}, drop_at_zero) is None
    assert merge_bucket([], {"a": 2}, update_count) == {"a": 2}


def test_exact_sums_keep_a_key_at_zero() -> None:
    merged = merge_bucket([{"c1": Decimal("-10.50")}], {"c1": Decimal("10.50")}, update_sum)
    assert merged == {"c1": Decimal("0.00")}
    assert str(merged["c1"]) == "0.00"


def test_merge_buckets_joins_the_parts_of_an_initial_bucket() -> None:
    assert merge_buckets({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    update = partial(merge_bucket, update=update_count)
    assert update([{"a": 1}], None) == {"a": 1}


def _shuffled(records: list[tuple[int, Any]], partitions: int) -> list[list[tuple[int, Any]]]:
    """Records partitioned by key as partitionBy(partitions) does (ints hash to themselves)."""
    out: list[list[tuple[int, Any]]] = [[] for _ in range(partitions)]
    for record in records:
        out[hash(record[0]) % partitions].append(record)
    return out


def test_a_batch_through_one_shuffle_gives_the_per_key_totals_over_many_batches() -> None:
    # batch_buckets then next_state, without Spark: each partition's counts by bucket,
    # the bucket dicts shuffled and merged, then each state partition merged with the
    # batch's partition of the same number.
    rng = random.Random(11)
    words = [f"w{i}" for i in range(400)]
    batches = [[Counter(rng.choices(words, k=150)) for _ in range(3)] for _ in range(10)]
    buckets, partitions = 16, 2
    state: list[list[tuple[int, Any]]] = [[] for _ in range(partitions)]
    for parts in batches:
        bucketed = [r for part in parts for r in by_bucket(part.items(), buckets)]
        batch = [list(merge_parts(p, add_counts)) for p in _shuffled(bucketed, partitions)]
        flat = Counter(dict(pair for part in batch for r in part for pair in batch_items(r)))
        assert flat == sum(parts, Counter())  # the batch's own counts, for the other sinks
        assert all(len({b for b, _ in part}) == len(part) for part in batch)  # once per bucket
        state = [list(merge_states(s + b, update_count)) for s, b in zip(state, batch, strict=True)]
    totals = {k: v for part in state for record in part for k, v in bucket_items(record)}
    assert totals == _per_key([sum(parts, Counter()) for parts in batches])
    assert all(hash(b) % partitions == i for i, part in enumerate(state) for b, _ in part)


def test_merge_states_tells_the_batch_from_the_state_whatever_the_order() -> None:
    for state_first in (True, False):
        # Fresh dicts each time: merge_states updates what it was given, as in a task.
        state, batch = (3, {"a": 5}), (3, ({"a": 1, "b": 2},))
        records = [state, batch] if state_first else [batch, state]
        assert list(merge_states(records, update_count)) == [(3, {"a": 6, "b": 2})]
    # A bucket only in the batch starts through the update function, like a new key.
    assert list(merge_states([(4, ({"c": 3},))], update_count)) == [(4, {"c": 3})]
    assert list(merge_states([(5, {"d": 1})], update_count)) == [(5, {"d": 1})]


def test_the_keyed_sum_bad_rows_are_merged_in_the_batch_and_kept_out_of_the_state() -> None:
    bad = BadRows(columns=1, samples=("x",))
    parts = [[("c1", Decimal("1.5")), (None, bad)], [("c1", Decimal("2")), (None, bad)]]
    bucketed = [r for part in parts for r in by_bucket(part, 8)]
    assert sum(1 for b, _ in bucketed if b == NO_BUCKET) == 2
    batch = list(merge_parts(bucketed, add_sums))
    pairs = dict(pair for record in batch for pair in batch_items(record))
    assert pairs == {"c1": Decimal("3.5"), None: BadRows(columns=2, samples=("x", "x"))}
    state = list(merge_states(batch, update_sum))
    assert state == [(bucket_of("c1", 8), {"c1": Decimal("3.5")})]
