"""The console sink's top N over a bucketed state: through a totals stream, or in its own job.

    python bench/sink_pass.py [--keys N] [--repeats N]

Real Spark (`local[2]`), one process. A state of N keys (Zipf counts) is kept as the app
keeps it: in 64 bucket dicts, partitioned by bucket and cached. Then, alternated:

- before: the pairs as a stream of their own gave them (`state.flatMap(bucket_items)` as
  a DStream): one Python pass flattens the buckets and pickles every pair back to the
  JVM, and the sink's `takeOrdered` unpickles them in a second pass;
- after: the sink flattens the buckets in its own job (`bucket_totals`), so the pairs go
  from the cached buckets straight into `takeOrdered`, in one pass.

Prints the median time of each and their ratio (a Markdown table).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import LOOPBACK_CONF, PARTITIONS
from bench.micro import side_by_side
from streaming_app.settings.schema import AppConfig
from streaming_app.sinks.console import _by_count
from streaming_app.state.buckets import bucket_items, bucket_totals, by_bucket, merge_buckets

BUCKETS = AppConfig().state_buckets  # the default
TOP_N = 10


def bucketed_state(sc: Any, keys: int) -> Any:
    """N (key, count) pairs in BUCKETS bucket dicts over PARTITIONS partitions, cached."""
    pairs = sc.parallelize(
        [(f"w{i}", 1_000_000 // (i + 1)) for i in range(keys)], PARTITIONS
    )  # fmt: skip
    state = (
        pairs.mapPartitions(partial(by_bucket, buckets=BUCKETS))
        .reduceByKey(merge_buckets, PARTITIONS)
        .cache()
    )
    state.count()
    return state


def through_a_stream(state: Any, top_n: int) -> list[tuple[str, int]]:
    """The totals as a DStream of their own handed them over: a JVM RDD of pickled pairs."""
    from pyspark import RDD

    flat = state.flatMap(bucket_items)
    handed = RDD(flat._jrdd, state.context, flat._jrdd_deserializer)
    top: list[tuple[str, int]] = handed.takeOrdered(top_n, key=_by_count)
    return top


def in_its_own_job(state: Any, top_n: int) -> list[tuple[str, int]]:
    """The sink flattens the buckets itself (what the app does now)."""
    top: list[tuple[str, int]] = bucket_totals(state).takeOrdered(top_n, key=_by_count)
    return top


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
        before, after = through_a_stream(state, TOP_N), in_its_own_job(state, TOP_N)
        if before != after:
            raise SystemExit(f"error: the two paths disagree: {before} != {after}")
        for _ in range(3):  # warm the workers
            through_a_stream(state, TOP_N), in_its_own_job(state, TOP_N)
        found = side_by_side(
            lambda: through_a_stream(state, TOP_N),
            lambda: in_its_own_job(state, TOP_N),
            options.repeats,
        )
    finally:
        sc.stop()
    ratio = found["after_s"] / found["before_s"]
    print(f"| state of {options.keys:,} keys in {BUCKETS} buckets | median of "
          f"{options.repeats}, alternated |")  # fmt: skip
    print("|---|---|")
    print(f"| top {TOP_N} through a totals stream (before) | {found['before_s'] * 1000:.1f} ms |")
    print(f"| top {TOP_N} in the sink's own job (after) | {found['after_s'] * 1000:.1f} ms |")
    print(f"| after / before | {ratio:.2f} |")


if __name__ == "__main__":
    main()
