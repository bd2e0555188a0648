"""The console sink's top N over a bucketed state: every total ranked, or the buckets' tops.

    python bench/run.py sink-pass [--keys N] [--repeats N]

Real Spark (`local[2]`), one process. A state of N keys (Zipf counts) is kept as the app
keeps it: in 64 packed buckets that carry their own top keys, partitioned by bucket and
cached. Then, alternated:

- before (0.3.0): the sink ranks every total: each bucket is unpacked and every pair goes
  through `takeOrdered` (`StateView.totals`);
- after (0.4.0): the sink ranks the buckets' own top N (`StateView.top`): no bucket is
  unpacked, 64 x N pairs are ranked.

Prints the median time of each and their ratio (a Markdown table).
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from typing import Any

from bench.harness.app import LOOPBACK_CONF
from bench.harness.corpus import PARTITIONS
from bench.throughput.micro import side_by_side
from streaming_app.jobs.text import add_counts, update_count
from streaming_app.settings.schema import AppConfig
from streaming_app.state.buckets import by_bucket, merge_buckets, new_bucket, rank
from streaming_app.state.view import StateView

BUCKETS = AppConfig().state_buckets  # the default
TOP_N = 10
VIEW = StateView(bucketed=True, add=add_counts)


def bucketed_state(sc: Any, keys: int) -> Any:
    """N (key, count) pairs in BUCKETS packed buckets over PARTITIONS partitions, cached."""
    pairs = sc.parallelize(
        [(f"w{i}", 1_000_000 // (i + 1)) for i in range(keys)], PARTITIONS
    )  # fmt: skip
    state = (
        pairs.mapPartitions(partial(by_bucket, buckets=BUCKETS))
        .reduceByKey(merge_buckets, PARTITIONS)
        .mapValues(partial(new_bucket, update=update_count, top_n=TOP_N))
        .cache()
    )
    state.count()
    return state


def every_total(state: Any, top_n: int) -> list[tuple[str, int]]:
    """Every total ranked: what the console sink did before the buckets kept their tops."""
    top: list[tuple[str, int]] = VIEW.totals(state).takeOrdered(top_n, key=rank)
    return top


def bucket_tops(state: Any, top_n: int) -> list[tuple[str, int]]:
    """The buckets' own tops ranked (what the app does now)."""
    return VIEW.top(state, top_n)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setMaster(f"local[{PARTITIONS}]").setAppName("sink-pass")
    conf.setAll(list(LOOPBACK_CONF.items()))
    conf.set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    try:
        state = bucketed_state(sc, options.keys)
        before, after = every_total(state, TOP_N), bucket_tops(state, TOP_N)
        if before != after:
            raise SystemExit(f"error: the two paths disagree: {before} != {after}")
        for _ in range(3):  # warm the workers
            every_total(state, TOP_N), bucket_tops(state, TOP_N)
        found = side_by_side(
            lambda: every_total(state, TOP_N),
            lambda: bucket_tops(state, TOP_N),
            options.repeats,
        )
    finally:
        sc.stop()
    ratio = found["after_s"] / found["before_s"]
    print(f"| state of {options.keys:,} keys in {BUCKETS} buckets | median of "
          f"{options.repeats}, alternated |")  # fmt: skip
    print("|---|---|")
    print(f"| top {TOP_N} of every total (before) | {found['before_s'] * 1000:.1f} ms |")
    print(f"| top {TOP_N} of the buckets' tops (after) | {found['after_s'] * 1000:.1f} ms |")
    print(f"| after / before | {ratio:.2f} |")
