"""The bucketed state: the same totals as one state record per key, batch after batch."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from decimal import Decimal
from functools import partial

from streaming_app.keyed import update_sum
from streaming_app.state import bucket_items, bucket_of, by_bucket, merge_bucket, merge_buckets
from streaming_app.text import update_count


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
