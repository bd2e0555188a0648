"""The bucketed state on real Spark (local mode, in this process): batch_buckets' RDDs
merged into the state by next_state without moving the state, in one Python pass per
partition, and a state partitioned by another driver process (a checkpoint) partitioned
anew, with exact totals either way.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from functools import partial
from typing import Any

import pytest

from streaming_app.jobs.text import add_counts, count_words, update_count
from streaming_app.state.buckets import (
    batch_buckets,
    batch_pairs,
    bucket_items,
    merge_parts,
    new_bucket,
    next_state,
)

PARTITIONS = 2
BUCKETS = 16


@pytest.fixture(scope="module")
def sc() -> Iterator[Any]:
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setMaster(f"local[{PARTITIONS}]").setAppName("test-state")
    conf.set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
    context = SparkContext.getOrCreate(conf)
    context.setLogLevel("ERROR")
    yield context
    context.stop()


def _batch(sc: Any, lines: list[str]) -> Any:
    """What batch_buckets makes of one batch's lines, as the state's update gets it from
    the stream: read with the stream's serializer (PySpark's TransformFunction wraps each
    RDD of a transformed DStream so), which loads the shuffle's output as it is."""
    from pyspark import RDD

    rdd = batch_buckets(sc.parallelize(lines, 3).mapPartitions(count_words), BUCKETS, PARTITIONS)
    return RDD(rdd._jrdd, sc, sc.serializer)


def _lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choices([f"w{i}" for i in range(300)], k=5)) for _ in range(n)]


def _shuffles(rdd: Any) -> int:
    """ShuffledRDDs in an RDD's lineage (its debug string)."""
    return str(rdd.toDebugString().decode()).count("ShuffledRDD")


def _python_passes(rdd: Any) -> int:
    """PythonRDDs in an RDD's lineage: each a Python worker's pass over its partitions."""
    return str(rdd.toDebugString().decode()).count("PythonRDD[")


def _step(state: Any, batch: Any) -> Any:
    return next_state(datetime.now(), state, batch, PARTITIONS, update_count).cache()


def test_the_state_stays_where_it_is_and_the_totals_are_exact(sc: Any) -> None:
    rng = random.Random(3)
    batches = [_lines(rng, 200) for _ in range(4)]
    state = None
    for lines in batches:
        batch = _batch(sc, lines)
        assert dict(batch_pairs(batch, add_counts).collect()) == Counter(
            w for line in lines for w in line.split()
        )
        if state is not None:
            # Partition-aware: the union keeps 2 partitions, and the new state's lineage
            # adds only the batch's own shuffle to the state's.
            assert state.union(batch).getNumPartitions() == PARTITIONS
            before, passes = _shuffles(state), _python_passes(state)
            state = _step(state, batch)
            assert _shuffles(state) == before + 1
            # Two passes: the counting (up to the shuffle) and the merge into the state,
            # which reads the shuffled dicts itself.
            assert _python_passes(state) == passes + 2
        else:
            state = _step(state, batch)
        state.count()
    totals = dict(state.flatMap(bucket_items).collect())
    assert totals == Counter(w for lines in batches for line in lines for w in line.split())


def test_a_state_partitioned_by_another_process_is_partitioned_anew(sc: Any) -> None:
    rng = random.Random(5)
    first, second = _lines(rng, 300), _lines(rng, 300)
    # A state as a checkpoint gives it back: partitioned by a partitioner Spark cannot
    # tell is the same (another process's function id).
    old = dict(
        _batch(sc, first)
        .mapPartitions(partial(merge_parts, reduce=add_counts))
        .map(lambda r: (r[0], new_bucket(r[1][0], update_count, 0)))
        .collect()
    )
    state = sc.parallelize(list(old.items()), PARTITIONS).partitionBy(
        PARTITIONS, partitionFunc=lambda bucket: bucket
    )
    batch = _batch(sc, second)
    assert state.union(batch).getNumPartitions() == 2 * PARTITIONS
    after = _step(state, batch)
    assert after.getNumPartitions() == PARTITIONS
    totals = dict(after.flatMap(bucket_items).collect())
    assert totals == Counter(w for line in first + second for w in line.split())
    # The next batch finds it partitioned as its own: no more reshuffling.
    assert after.union(_batch(sc, second)).getNumPartitions() == PARTITIONS


def test_the_view_reads_changes_tops_and_figures_from_the_buckets_in_one_job(sc: Any) -> None:
    from streaming_app.sinks.files_layout import format_total
    from streaming_app.state.view import StateView

    view = StateView(bucketed=True, add=add_counts)
    rng = random.Random(9)
    state, totals = None, Counter[str]()
    for _ in range(3):
        lines = _lines(rng, 150)
        batch_counts = Counter(w for line in lines for w in line.split())
        totals.update(batch_counts)
        state = next_state(
            datetime.now(), state, _batch(sc, lines), PARTITIONS, update_count, top_n=5
        ).cache()
        changed = view.changed(state)
        assert changed is not None
        assert dict(changed.collect()) == {w: totals[w] for w in batch_counts}
        assert view.changed_count(state) == len(batch_counts)
        changed_lines = view.changed_lines(state, format_total)
        assert changed_lines is not None
        assert sorted("\n".join(changed_lines.collect()).split("\n")) == sorted(
            format_total((w, totals[w])) for w in batch_counts
        )
        assert view.top(state, 5) == sorted(totals.items(), key=lambda p: (-p[1], p[0]))[:5]
        assert view.figures(state) == (len(totals), sum(totals.values()))
        assert dict(view.totals(state).collect()) == totals
        # One joined element per non-empty bucket, the same lines as one per key.
        joined = view.lines(state, format_total).collect()
        assert len(joined) == sum(1 for _, bucket in state.collect() if bucket.keys) > 1
        assert all(joined)
        assert sorted("\n".join(joined).split("\n")) == sorted(
            format_total(p) for p in totals.items()
        )
        # The sinks of one batch share one digest: the same object, no second job.
        assert view.digest(state) is view.digest(state)
    # An idle batch: nothing changed, the tops and figures as they were.
    idle = next_state(
        datetime.now(), state, sc.parallelize([], PARTITIONS), PARTITIONS, update_count, top_n=5
    )
    changed = view.changed(idle)
    assert changed is not None and changed.collect() == []
    assert view.changed_count(idle) == 0
    assert view.figures(idle) == (len(totals), sum(totals.values()))


def test_the_files_sinks_job_brings_the_digest_so_the_console_and_figures_run_none(
    sc: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch of the files and console sinks (the README's) is one Spark job: the files
    sink's writing tasks bring the digest back, and the console's top and the metrics'
    figures read it. A base and two deltas, each written exactly."""
    from streaming_app.sinks.console import write_console
    from streaming_app.sinks.files import FilesSettings, write_totals
    from streaming_app.sinks.files_layout import read_totals
    from streaming_app.state.view import StateView

    batch_ms = 2000
    view = StateView(bucketed=True, add=add_counts)
    files = FilesSettings(str(tmp_path / "out"), 10, 3 * batch_ms, batch_ms, "ctx")
    rng = random.Random(11)
    state, totals = None, Counter[str]()
    for round_no in range(1, 4):  # a base (the first), then two deltas
        lines = _lines(rng, 150)
        totals.update(w for line in lines for w in line.split())
        state = next_state(
            datetime.now(), state, _batch(sc, lines), PARTITIONS, update_count, top_n=5
        ).cache()
        state.count()
        group = f"files and console, batch {round_no}"
        sc.setJobGroup(group, group)
        t = datetime.fromtimestamp(round_no * batch_ms / 1000)
        write_totals(t, state, view, files)
        write_console(t, state, view, 5)
        assert view.figures(state) == (len(totals), sum(totals.values()))
        sc.setJobGroup("", "")
        assert len(sc.statusTracker().getJobIdsForGroup(group)) == 1, group
        top = sorted(totals.items(), key=lambda p: (-p[1], p[0]))[:5]
        assert view.top(state, 5) == top
        assert top[0][0] in capsys.readouterr().out  # the console printed the top
        assert read_totals(files.output_dir) == (round_no * batch_ms, dict(totals))
