"""The bucketed state: the same totals as one state record per key, batch after batch."""

from __future__ import annotations

import pickle
import random
import zlib
from collections import Counter
from decimal import Decimal
from functools import partial
from typing import Any

import pytest

from streaming_app.jobs.keyed import BadRows, add_sums, update_sum
from streaming_app.jobs.text import add_counts, update_count
from streaming_app.state.buckets import (
    NO_BUCKET,
    Bucket,
    added_of,
    batch_items,
    bucket_items,
    bucket_of,
    by_bucket,
    merge_bucket,
    merge_buckets,
    merge_parts,
    merge_states,
    new_bucket,
    pack,
    rank,
    top,
    top_of,
    unpack,
)


def _state(totals: dict[str, Any], update: Any = update_count, top_n: int = 0) -> Bucket:
    return new_bucket(dict(totals), update, top_n)


def _totals(bucket: Bucket | None) -> dict[str, Any] | None:
    return None if bucket is None else unpack(bucket.packed)


def test_bucket_of_is_stable_and_in_range() -> None:
    # zlib.crc32, not hash(): the same in every worker process and every run.
    assert bucket_of("spark", 64) == zlib.crc32(b"spark") % 64
    assert [bucket_of(w, 8) for w in ("a", "b", "café", "\udcff")] == [
        bucket_of(w, 8) for w in ("a", "b", "café", "\udcff")
    ]
    assert all(0 <= bucket_of(f"w{i}", 7) < 7 for i in range(1000))
    assert len({bucket_of(f"w{i}", 16) for i in range(1000)}) == 16


def test_by_bucket_groups_a_partition_without_losing_a_pair() -> None:
    pairs = [(f"w{i}", i) for i in range(500)] + [("café", 1), ("\udcff", 2), ("İ", 3)]
    records = list(by_bucket(pairs, 16))
    assert len({b for b, _ in records}) == len(records)  # one record per bucket
    flat = [pair for _, values in records for pair in values.items()]
    assert sorted(flat) == sorted(pairs)
    assert all(bucket_of(k, 16) == b for b, d in records for k in d)
    # The keyed-sum job's bad rows (the key None) in a record of their own.
    assert dict(by_bucket([("a", 1), (None, 5)], 4))[NO_BUCKET] == {None: 5}


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
    state: dict[int, Bucket] = {}
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

    after = merge_bucket([{"a": -2}], _state({"a": 2, "b": 1}), drop_at_zero)
    assert _totals(after) == {"b": 1}
    assert after is not None and after.changed is None and after.keys == 1
    assert merge_bucket([{"a": -2}], _state({"a": 2}), drop_at_zero) is None
    assert _totals(merge_bucket([], _state({"a": 2}), update_count)) == {"a": 2}


def test_exact_sums_keep_a_key_at_zero() -> None:
    state = _state({"c1": Decimal("10.50")}, update_sum)
    merged = merge_bucket([{"c1": Decimal("-10.50")}], state, update_sum)
    assert merged is not None
    assert _totals(merged) == {"c1": Decimal("0.00")}
    assert str(merged.changed["c1"]) == "0.00"  # type: ignore[index]
    assert merged.total == Decimal("0.00") and merged.keys == 1


def test_packing_takes_marshal_for_counts_and_pickle_for_exact_sums() -> None:
    counts = {"a": 1, "b": 10**30, "\udcff": -3}
    sums = {"c1": Decimal("0.10"), "c2": Decimal("-1E+3")}
    assert pack(counts)[:1] == b"m" and pack(sums)[:1] == b"p"
    assert unpack(pack(counts)) == counts
    assert unpack(pack(sums)) == sums
    assert str(unpack(pack(sums))["c2"]) == "-1E+3"


def test_a_bucket_records_what_the_batch_changed_and_its_count_and_sum() -> None:
    before = _state({"a": 5, "b": 1}, top_n=2)
    assert (before.changed, before.keys, before.total) == (None, 2, 6)
    after = merge_bucket([{"a": 2}, {"c": 4}], before, update_count, top_n=2)
    assert after is not None
    assert after.changed == {"a": 7, "c": 4}
    assert (after.keys, after.total) == (3, 12)
    assert after.added == 6  # the batch's words, for the metrics
    assert after.top == [("a", 7), ("c", 4)]
    # The record pickles as a tuple through Spark and stays whole.
    assert pickle.loads(pickle.dumps(after)) == after


def test_a_bucket_the_batch_does_not_touch_passes_through_unopened() -> None:
    # Bytes that do not unpack: merge_states would fail if it opened the bucket.
    untouched = Bucket(b"not packed", {"x": 1}, [("x", 1)], 1, 1, 1)
    out = dict(merge_states([(1, untouched), (2, ({"y": 1},))], update_count, top_n=1))
    assert out[1] == Bucket(b"not packed", None, [("x", 1)], 1, 1, None)
    assert _totals(out[2]) == {"y": 1} and out[2].changed == {"y": 1} and out[2].added == 1


def test_a_bucket_of_a_checkpoint_without_added_reads_as_adding_nothing() -> None:
    # PySpark's namedtuple patch restores a record with the field names it was pickled
    # with: a checkpoint of the version before `added` gives five-field tuples.
    import collections

    old = collections.namedtuple("Bucket", "packed changed top keys total")
    record = old(pack({"x": 2}), {"x": 2}, None, 1, 2)
    assert added_of(record) is None
    assert merge_states([(1, record)], update_count) is not None
    passed = dict(merge_states([(1, record)], update_count))[1]
    assert passed == Bucket(record.packed, None, None, 1, 2) and added_of(passed) is None
    merged = merge_bucket([{"x": 3}], record, update_count)  # type: ignore[arg-type]
    assert merged is not None and (merged.total, merged.added) == (5, 3)


def _ranked(totals: dict[str, Any], n: int) -> list[tuple[str, Any]]:
    return sorted(totals.items(), key=rank)[:n]


@pytest.mark.parametrize("negative", [False, True])
def test_each_buckets_top_is_its_best_keys_batch_after_batch(negative: bool) -> None:
    # Counts only grow (the top is updated from the changed keys); exact sums may fall
    # (then the whole bucket is ranked again). Either way the top is the brute force one.
    rng = random.Random(13)
    update = update_sum if negative else update_count
    low = -3 if negative else 1
    state: Bucket | None = None
    totals: dict[str, Any] = {}
    for _ in range(200):
        part = {f"k{rng.randrange(40)}": rng.randint(low, 5) for _ in range(rng.randint(1, 6))}
        if negative:
            part = {k: Decimal(v) for k, v in part.items()}
        for key, value in part.items():
            totals[key] = totals.get(key, 0) + value
        state = merge_bucket([part], state, update, top_n=5)
        assert state is not None
        assert state.top == _ranked(totals, 5)
        assert state.keys == len(totals) and state.total == sum(totals.values())


def test_top_of_ranks_ties_by_key_and_none_without_a_console() -> None:
    totals = {"b": 2, "a": 2, "c": 1}
    assert top_of(totals, None, totals, 2) == [("a", 2), ("b", 2)]
    assert top_of(totals, None, totals, 0) is None


def test_merge_buckets_joins_the_parts_of_an_initial_bucket() -> None:
    assert merge_buckets({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    update = partial(merge_bucket, update=update_count)
    assert _totals(update([{"a": 1}], None)) == {"a": 1}


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


@pytest.mark.parametrize("update", [update_count, update_sum], ids=["count", "exact sum"])
def test_the_state_merges_the_shuffled_dicts_as_it_merges_them_reduced(update: Any) -> None:
    # What the factory hands the state (batch_buckets): each counting partition's dicts,
    # several to a bucket. The state after each batch equals the one merge_parts' reduced
    # records give (a context built before), totals, changes, figures and tops alike.
    rng = random.Random(13)
    words = [f"w{i}" for i in range(300)]
    one = Decimal(1) if update is update_sum else 1
    reduce = add_sums if update is update_sum else add_counts
    unreduced: list[tuple[int, Any]] = []
    reduced: list[tuple[int, Any]] = []
    for _ in range(6):
        parts = [Counter(rng.choices(words, k=120)) for _ in range(3)]
        bucketed = [
            r for part in parts for r in by_bucket(((k, v * one) for k, v in part.items()), 8)
        ]
        assert len(bucketed) > len({b for b, _ in bucketed})  # buckets in several parts
        copies = pickle.loads(pickle.dumps(bucketed))  # a task's own dicts, as unpickled
        unreduced = list(merge_states(unreduced + bucketed, update, top_n=3))
        reduced = list(merge_states(reduced + list(merge_parts(copies, reduce)), update, top_n=3))
        assert _opened(unreduced) == _opened(reduced)


def _opened(records: list[tuple[int, Bucket]]) -> dict[int, tuple[Any, ...]]:
    """Each bucket's totals unpacked, with the rest of its record."""
    return {index: (_totals(b), b.changed, b.top, b.keys, b.total, b.added) for index, b in records}


def test_merge_states_tells_the_batch_from_the_state_whatever_the_order() -> None:
    for state_first in (True, False):
        # Fresh dicts each time: merge_states updates what it was given, as in a task.
        state, batch = (3, _state({"a": 5})), (3, ({"a": 1, "b": 2},))
        records = [state, batch] if state_first else [batch, state]
        [(index, merged)] = merge_states(records, update_count)
        assert (index, _totals(merged)) == (3, {"a": 6, "b": 2})
    # A bucket only in the batch starts through the update function, like a new key.
    [(index, merged)] = merge_states([(4, ({"c": 3},))], update_count)
    assert (index, _totals(merged)) == (4, {"c": 3})
    # The shuffled dicts as they come (batch_buckets), two parts of one bucket.
    state = (6, _state({"a": 5}))
    [(index, merged)] = merge_states([(6, {"a": 1}), state, (6, {"a": 2, "b": 1})], update_count)
    assert (index, _totals(merged), merged.changed) == (6, {"a": 8, "b": 1}, {"a": 8, "b": 1})
    assert merged.added == 4
    [(index, merged)] = merge_states([(5, _state({"d": 1}))], update_count)
    assert (index, _totals(merged)) == (5, {"d": 1})


def test_the_keyed_sum_bad_rows_are_merged_in_the_batch_and_kept_out_of_the_state() -> None:
    bad = BadRows(columns=1, samples=("x",))
    parts = [[("c1", Decimal("1.5")), (None, bad)], [("c1", Decimal("2")), (None, bad)]]
    bucketed = [r for part in parts for r in by_bucket(part, 8)]
    assert sum(1 for b, _ in bucketed if b == NO_BUCKET) == 2
    batch = list(merge_parts(bucketed, add_sums))
    pairs = dict(pair for record in batch for pair in batch_items(record))
    assert pairs == {"c1": Decimal("3.5"), None: BadRows(columns=2, samples=("x", "x"))}
    [(index, merged)] = merge_states(batch, update_sum)
    assert (index, _totals(merged)) == (bucket_of("c1", 8), {"c1": Decimal("3.5")})


def test_the_inlined_word_count_update_gives_what_update_count_gives() -> None:
    # merge_bucket inlines update_count; through any other function it calls the update
    # per key. Both ways give the same bucket, zero counts of new keys included.
    rng = random.Random(17)

    def called(new: Any, total: Any) -> Any:
        return update_count(new, total)

    state = _state({f"w{i}": rng.randint(1, 100) for i in range(300)}, top_n=5)
    for _ in range(20):
        part = {f"w{rng.randrange(600)}": rng.randint(0, 3) for _ in range(80)}
        fast = merge_bucket([dict(part)], state, update_count, top_n=5)
        slow = merge_bucket([dict(part)], state, called, top_n=5)
        assert fast is not None and slow is not None
        assert _totals(fast) == _totals(slow)
        assert (fast.changed, fast.top, fast.keys, fast.total) == (
            slow.changed,
            slow.top,
            slow.keys,
            slow.total,
        )
        state = fast


@pytest.mark.parametrize("n", [0, 1, 3, 50])
def test_top_is_the_first_n_by_rank_ties_by_key(n: int) -> None:
    rng = random.Random(n)
    pairs = [(f"k{rng.randrange(40)}", rng.choice([1, 2, 2, 3, Decimal("2.5")])) for _ in range(30)]
    pairs = list(dict(pairs).items())
    assert top(pairs, n) == sorted(pairs, key=rank)[:n]
    assert top(iter(pairs), n) == sorted(pairs, key=rank)[:n]
