"""The warm-up benchmark's pure parts (bench/throughput/warmup.py): the JVM's thread groups,
each window's CPU per group and batches, and its table."""

from __future__ import annotations

from bench.harness.proc_cpu import Samples
from bench.throughput.warmup import report, shown_groups, thread_group, windows


def test_a_threads_group_is_its_name_without_numbers_and_task_threads_are_one() -> None:
    assert thread_group("C2 CompilerThre") == "JVM: C# CompilerThre"
    assert thread_group("GC Thread#1\n") == "JVM: GC Thread##"
    assert thread_group("Executor task l") == thread_group("Executor task i")
    assert thread_group("Executor task l") == "JVM: task threads"


def test_each_window_has_what_each_group_spent_in_it_and_its_batches() -> None:
    samples = Samples()
    start = 1000.0
    # A task thread seen from the first sample, a compiler thread born in the second window.
    for at, cpu in ((1002, 0.5), (1010, 1.5), (1020, 2.0)):
        samples.add(7, "JVM: task threads", at, cpu)
    for at, cpu in ((1012, 0.25), (1020, 0.75)):
        samples.add(8, "JVM: C# CompilerThre", at, cpu)
    batches = [(1004.0, 100, 0.5), (1008.0, 100, 0.25), (1014.0, 200, 0.75)]
    first, second = windows(samples, batches, start, 10)
    assert first == {
        "from_s": 0, "to_s": 10, "batches": 2, "lines": 200, "median_batch_s": 0.375,
        "cpu_s": {"JVM: task threads": 1.5}, "total_cpu_s": 1.5, "cpu_ms_per_kline": 7500.0,
    }  # fmt: skip
    assert second["cpu_s"] == {"JVM: task threads": 0.5, "JVM: C# CompilerThre": 0.75}
    assert (second["batches"], second["lines"], second["median_batch_s"]) == (1, 200, 0.75)
    assert second["cpu_ms_per_kline"] == 6250.0


def test_the_table_shows_the_largest_groups_and_sums_the_rest() -> None:
    rows = [
        {"from_s": 0, "to_s": 10, "batches": 1, "lines": 10, "median_batch_s": 0.5,
         "cpu_s": {"a": 3.0, "b": 1.0, "c": 0.5}, "total_cpu_s": 4.5, "cpu_ms_per_kline": 450.0},
        {"from_s": 10, "to_s": 20, "batches": 0, "lines": 0, "median_batch_s": None,
         "cpu_s": {"b": 1.0, "c": 0.25}, "total_cpu_s": 1.25, "cpu_ms_per_kline": None},
    ]  # fmt: skip
    assert shown_groups(rows, 2) == ["a", "b"]
    found = {"windows": rows, "batch_lines": 60_000, "seconds": 20, "window": 10,
             "machine": {"cpu": "AMD EPYC, 2 cores"}}  # fmt: skip
    table = report(found)
    assert table[2].startswith("| window | batches | median batch | ")
    assert "| 0-10 s | 1 | 0.50 s |" in table[4]
    assert table[5] == "| 10-20 s | 0 |  | 0.00 | 1.00 | 0.25 | 0.00 | 1.25 |  |"
