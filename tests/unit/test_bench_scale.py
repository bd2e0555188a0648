"""The scale-out benchmark's pure parts: /proc parsing, CPU windows, Spark's event log, report."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.harness.proc_cpu import (
    Samples,
    busy_ticks,
    by_class,
    machine_busy_s,
    process_class,
    stat_ticks,
    window_cpu,
)
from bench.scale.event_log import (
    Stage,
    batches,
    label,
    read_events,
    summary,
    timeline,
    union_ms,
)
from bench.scale.report import gains, projection, quota_use, report, verdict

# /proc/<pid>/stat of a process whose name holds ") " and spaces: fields count from the last ")".
STAT = "4242 (odd) name (x)) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 75 9 3 20 0 1 0 5 0 0"


def test_stat_ticks_are_utime_plus_stime_counted_from_the_last_parenthesis() -> None:
    assert stat_ticks(STAT) == 250 + 75


def test_busy_ticks_leave_out_idle_and_iowait() -> None:
    text = "cpu  100 5 40 800 30 2 3 0 0 0\ncpu0 50 2 20 400 15 1 1 0 0 0\n"
    assert busy_ticks(text) == (100 + 5 + 40 + 2 + 3, 980)
    with pytest.raises(ValueError):
        busy_ticks("intr 1 2 3\n")


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("java org.apache.spark.executor.CoarseGrainedExecutorBackend", "executor JVM"),
        ("java org.apache.spark.deploy.SparkSubmit scripts/spark_main.py run", "driver JVM"),
        ("/venv/bin/python /repo/scripts/spark_main.py run --source kafka", "driver Python"),
        ("/venv/bin/python -m pyspark.daemon", "Python workers"),
        ("/venv/bin/python -m streaming_app.lifecycle.worker_daemon", "Python workers"),
        ("java org.apache.spark.deploy.master.Master --host 10.0.0.2", "master"),
        ("java org.apache.spark.deploy.worker.Worker --host 10.0.0.3", "worker daemon"),
        ("/x/tansu broker --listener-url tcp://10.0.0.6:9092", "broker"),
        ("postgres: postgres postgres 10.0.0.5(4242) idle", "PostgreSQL"),
        ("/usr/lib/postgresql/17/bin/postgres -D /tmp/sa-pg-1/data -p 5432", "PostgreSQL"),
        # scripts/submit.sh before it execs spark-submit: not PostgreSQL for its arguments.
        ("/bin/bash scripts/submit.sh --master x -- --sink postgres --postgres-table t", "other"),
        ("python -c import bench.scale.plain as p; p.count_child()", "plain Python"),
        ("/bin/bash scripts/submit.sh", "other"),
    ],
)  # fmt: skip
def test_each_process_of_a_run_gets_its_class(command: str, kind: str) -> None:
    assert process_class(command) == kind


def _samples() -> Samples:
    samples = Samples()
    for at, cpu in ((0, 1.0), (10, 3.0), (20, 9.0), (30, 10.0)):
        samples.add(1, "driver JVM", at, cpu)  # alive throughout
    for at, cpu in ((15, 0.5), (20, 2.5)):
        samples.add(2, "Python workers", at, cpu)  # born inside the window
    samples.add(3, "Python workers", 5, 4.0)  # gone before the window
    samples.add(4, "broker", 40, 1.0)  # born after it
    samples.machine += [(0, 100.0), (10, 110.0), (20, 125.0)]
    return samples


def test_a_window_counts_each_process_from_its_last_sample_before_it() -> None:
    samples = _samples()
    spent = window_cpu(samples, 10, 20)
    # pid 1: 9 - 3; pid 2 born inside: all of its 2.5; pid 3 ended before: nothing spent.
    assert spent == {1: 6.0, 2: 2.5, 3: 0.0}
    assert by_class(samples, spent) == {"driver JVM": 6.0, "Python workers": 2.5}
    assert machine_busy_s(samples, 10, 20) == 15.0


def _event(kind: str, **fields: Any) -> str:
    return json.dumps({"Event": kind, **fields})


def _stage_events(stage: int, tasks: list[tuple[int, int, str]], start: int, end: int,
                  rdd: str = "PythonRDD") -> list[str]:  # fmt: skip
    ended = [
        _event("SparkListenerTaskEnd", **{"Stage ID": stage, "Task Info": {"Executor ID": ex},
               "Task Metrics": {"Executor Run Time": run, "Executor CPU Time": cpu * 1_000_000}})
        for run, cpu, ex in tasks
    ]  # fmt: skip
    info = {"Stage ID": stage, "Stage Name": f"step{stage} at x.py:1",
            "Number of Tasks": len(tasks), "Submission Time": start,
            "Completion Time": end, "RDD Info": [{"Name": rdd}]}  # fmt: skip
    return [*ended, _event("SparkListenerStageCompleted", **{"Stage Info": info})]


def _log() -> list[str]:
    props = {"spark.streaming.internal.batchTime": "2000"}
    return [
        _event("SparkListenerJobStart", **{"Job ID": 0, "Submission Time": 1000,
               "Stage IDs": [0, 1], "Properties": props}),
        *_stage_events(0, [(300, 250, "0"), (310, 260, "1")], 1010, 1400, "ParallelCollectionRDD"),
        *_stage_events(1, [(200, 190, "0")], 1400, 1600),
        _event("SparkListenerJobEnd", **{"Job ID": 0, "Completion Time": 1650}),
        # A job of no batch (Spark's own), and a stage it lists that never ran.
        _event("SparkListenerJobStart", **{"Job ID": 1, "Submission Time": 1700,
               "Stage IDs": [2, 3], "Properties": {}}),
        *_stage_events(2, [(5, 5, "0")], 1700, 1710),
        _event("SparkListenerJobStart", **{"Job ID": 2, "Submission Time": 1900,
               "Stage IDs": [4, 5], "Properties": props}),
        *_stage_events(5, [(50, 40, "1"), (60, 50, "1")], 1950, 2050),
        _event("SparkListenerJobEnd", **{"Job ID": 2, "Completion Time": 2100}),
        '{"Event": "SparkListenerJobStart", "Job ID": 3, "Subm',  # cut by a stop
    ]  # fmt: skip


def test_a_stage_is_labelled_by_its_call_site_and_its_rdds() -> None:
    stage = Stage(1, "call at /x/py4j/clientserver.py:644", 2, 0, 1,
                  ["ShuffledRDD", "PythonRDD", "PythonRDD"])  # fmt: skip
    assert label(stage) == "call at clientserver.py:644: PythonRDD+ShuffledRDD"


def test_union_of_intervals_counts_overlaps_once() -> None:
    assert union_ms([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
    assert union_ms([]) == 0


def test_the_event_log_gives_each_batch_its_stages_and_the_drivers_gap() -> None:
    found = batches(read_events(_log()))
    assert list(found) == [2000]
    batch = found[2000]
    assert [s.stage_id for s in batch.stages] == [0, 1, 5]
    first = batch.stages[0]
    assert (first.tasks, first.duration_ms, first.task_run_ms, first.executors) == (
        2, 390, 610, {"0", "1"},
    )  # fmt: skip
    assert first.task_cpu_ms == pytest.approx(510)
    # Window 1000 -> 2100; stages ran 1010-1600 and 1950-2050: 690 ms; the rest, 410 ms.
    # Stage 0 reads (a ParallelCollectionRDD): 390 ms.
    assert timeline(batch) == {"jobs": 2, "window_ms": 1100, "stages_ms": 690, "read_ms": 390,
                               "driver_gap_ms": 410}  # fmt: skip
    summed = summary(found, [2000, 4000])
    assert summed["batches"] == 1
    assert summed["one_task_stages"] == ["step1 at x.py:1: PythonRDD"]
    by_name = {s["name"]: s for s in summed["stages"]}
    assert by_name["step5 at x.py:1: PythonRDD"]["executors"] == ["1"]


def _run(words_per_s: float, us: dict[str, float], busy: float, gap: int = 100,
         processing: float = 1.0) -> dict[str, Any]:  # fmt: skip
    stages = [{"name": "read", "tasks": [2], "executors": ["0", "1"], "duration_ms": 1,
               "task_run_ms": 1, "task_cpu_ms": 1}]  # fmt: skip
    return {
        "mean_words_per_s": words_per_s, "cpu_us_per_word": us, "machine_busy_share": busy,
        "hosts_share_of_busy": 0.97, "processing_s": processing, "scheduling_delay_s": [0.5, 4.0],
        "timeline": {"driver_gap_ms": gap, "one_task_stages": [], "stages": stages,
                     "window_ms": 900, "stages_ms": 800, "jobs": 3},
    }  # fmt: skip


def _found() -> dict[str, list[dict[str, Any]]]:
    app_us = {"executor JVM": 1.0, "Python workers": 2.0, "driver Python": 0.5, "broker": 0.5}
    return {
        "app-1": [_run(400_000, app_us, 0.9, gap=50, processing=2.0)],
        "app-2": [_run(450_000, app_us, 0.98, gap=150, processing=1.8)],
        "plain-1": [_run(1_000_000, {"plain Python": 1.0}, 0.6)],
        "plain-2": [_run(2_000_000, {"plain Python": 1.0}, 1.0)],
    }


def test_the_apps_gain_is_set_against_plain_pythons() -> None:
    g = gains(_found())
    assert g["app_gain"] == pytest.approx(1.125)
    assert g["plain_gain"] == pytest.approx(2.0)
    assert g["relative"] == pytest.approx(0.5625)
    assert not g["meets"]


def test_a_machine_all_busy_at_its_ceiling_is_the_bound() -> None:
    v = verdict(_found())
    # 4 µs a word on 2 cores: 500,000 words/s at most; the app made 450,000 (90%).
    assert v["ceiling"] == pytest.approx(500_000)
    assert v["of_ceiling"] == pytest.approx(0.9)
    assert v["machine_bound"]
    found = _found()
    found["app-2"][0]["machine_busy_share"] = 0.6  # cores left idle: not the machine
    assert not verdict(found)["machine_bound"]


def test_the_projection_takes_the_least_of_its_bounds() -> None:
    found = _found()
    # The 1-worker batch: 2.0 s, of which stages 1.9 s (the Kafka read 1.0 s): 0.1 s fixed.
    found["app-1"][0]["timeline"].update(stages_ms=1900, read_ms=1000)
    rows = {r["cores"]: r for r in projection(found, batch_lines=60_000, partitions=2)}
    # Executors: 3 µs a word, so 333,333 words/s a core.
    assert rows[1]["cpu_bound"] == pytest.approx(1e6 / 3)
    # 600,000 words a batch; the read divides by 2 partitions at most, the rest by N.
    assert rows[4]["timeline_bound"] == pytest.approx(600_000 / (0.1 + 1.0 / 2 + 0.9 / 4))
    # The driver's Python, 0.5 µs a word on its one core: 2M words/s.
    assert rows[16]["driver_bound"] == pytest.approx(2e6)
    # With 16 partitions the read spreads too: 600,000 / (0.1 + 1.9 / 16) = 2.74M, so the
    # driver bounds it; with 2 it is the read: 600,000 / (0.1 + 0.5 + 0.9 / 16).
    assert rows[16]["with_partitions"] == pytest.approx(2e6)
    assert rows[16]["projected"] == pytest.approx(600_000 / (0.1 + 0.5 + 0.9 / 16))
    assert rows[1]["projected"] == pytest.approx(300_000)  # the 1-worker batch itself
    for row in rows.values():
        assert row["projected"] == min(row["cpu_bound"], row["timeline_bound"], row["driver_bound"])


def _results(found: dict[str, list[dict[str, Any]]], **more: Any) -> dict[str, Any]:
    """scale_out.json's results of one files invocation whose runs are `found`."""
    return {
        "date": "2026-11-29", "runs": 1, "lines": 10, "batch_lines": 60_000, "partitions": 2,
        "sinks": ["files"], "files": found,
        "machine": {"cpu": "X, 2 cores", "python": "3", "pyspark": "4", "java": "j"}, **more,
    }  # fmt: skip


def test_the_report_names_the_gains_and_the_target() -> None:
    text = "\n".join(report(_results(_found())))
    assert "x1.12" in text and "x2.00" in text
    assert "**0.56** (target ≥ 0.85: not met)" in text
    assert "bounded by **the machine's cores**" in text


def test_an_env_side_is_reported_against_the_same_plain_runs() -> None:
    found = _found()
    app_us = {"executor JVM": 1.0, "Python workers": 2.0, "driver Python": 0.1}
    found["app-1@C2"] = [_run(500_000, app_us, 0.8)]
    found["app-2@C2"] = [_run(800_000, app_us, 0.95)]
    side = ["C2", {"STREAMING_APP_JVM_C1": "0"}]
    text = "\n".join(report(_results(found, env_side=side)))
    # The app's own: x1.12, 0.56 of plain's x2.00; the side's: 500k → 800k, x1.60, 0.80.
    assert "**0.56** (target ≥ 0.85: not met)" in text
    assert "### Sink: files, C2" in text
    assert "`STREAMING_APP_JVM_C1=0` added to the driver's environment" in text
    assert "1 worker 500,000 words/s (x1.25 the app's), 2 workers 800,000 (x1.78)" in text
    assert "gain x1.60 against x1.12, 0.80 of plain Python's against 0.56" in text
    assert "**0.80** (target ≥ 0.85: not met)" in text


def test_under_worker_quotas_the_report_says_how_much_of_them_was_used() -> None:
    found = _found()
    spent = {
        "app-1": {"Python workers": 0.8, "executor JVM": 0.1},
        "app-2": {"Python workers": 1.5, "executor JVM": 0.2, "broker": 5.0},
        "plain-1": {"plain Python": 0.5},
        "plain-2": {"plain Python": 1.0},
    }
    for key, cpu_s in spent.items():
        found[key][0].update(cpu_s=cpu_s, window_s=2.0)
    # Half a core a host over 2 s: 1 CPU second a host. The broker is not on a worker host.
    assert quota_use(found["app-1"], 1, 0.5) == pytest.approx(0.9)
    assert quota_use(found["app-2"], 2, 0.5) == pytest.approx(0.85)
    assert quota_use(found["plain-2"], 2, 0.5) == pytest.approx(0.5)
    text = "\n".join(report(_results(found, worker_cpu=0.5)))
    assert "Each worker host held to 0.5 of a core" in text
    row = "| worker hosts' CPU / their quota (0.5 of a core each) | 90% | 85% | 50% | 50% |"
    assert row in text
    assert "bounded by **not the quota alone**: the worker hosts used 90% of theirs with " in text
    assert "No projection" in text and "Projection for N executor cores" not in text
    found["app-2"][0]["cpu_s"]["Python workers"] = 1.7  # 95%: the quota is the bound
    text = "\n".join(report(_results(found, worker_cpu=0.5)))
    assert "bounded by **the workers' quota**" in text
    assert "their quota" not in "\n".join(report(_results(_found())))
