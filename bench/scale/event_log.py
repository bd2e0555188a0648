"""A batch's timeline from Spark's event log: its jobs, each stage's tasks, the driver's gaps.

Spark writes one JSON event a line (`spark.eventLog.enabled`). A streaming batch's jobs
carry its time in their properties (`spark.streaming.internal.batchTime`, set by the
JobScheduler); a job's stages are listed at its start, and a stage's tasks end with their
launch and finish times and their executor's run and CPU time. Per batch: the window from
its first job's start to its last job's end, the time in it when some stage ran (the
union of the stages' intervals), and the rest, when no stage ran: the driver's own work
between jobs (sinks' commits, snapshots, job scheduling). Stages that ran one task, and
how long, say whether a step does not spread over the executors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

BATCH_TIME = "spark.streaming.internal.batchTime"


@dataclass
class Stage:
    """One stage as it completed: its name, tasks, interval and the tasks' own times."""

    stage_id: int
    name: str
    tasks: int
    submitted_ms: int
    completed_ms: int
    rdds: list[str]
    task_run_ms: int = 0
    task_cpu_ms: float = 0.0
    executors: set[str] = field(default_factory=set)

    @property
    def duration_ms(self) -> int:
        return self.completed_ms - self.submitted_ms


@dataclass
class Batch:
    """One batch's jobs (start and end) and the stages they ran."""

    batch_ms: int
    job_starts: list[int] = field(default_factory=list)
    job_ends: list[int] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)


def union_ms(intervals: Iterable[tuple[int, int]]) -> int:
    """The length of the union of [start, end) intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def read_events(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The events of an event log's lines (a line cut by a stop is skipped)."""
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def batches(events: list[dict[str, Any]]) -> dict[int, Batch]:
    """Each streaming batch's jobs and completed stages, by batch time (ms)."""
    found: dict[int, Batch] = {}
    job_batch: dict[int, int] = {}
    stage_batch: dict[int, int] = {}
    # A stage's tasks end before it completes: their times wait here for it, by stage id.
    tasks: dict[int, list[tuple[int, float, str]]] = {}
    for event in events:
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            batch_time = (event.get("Properties") or {}).get(BATCH_TIME)
            if batch_time is None:
                continue
            batch = found.setdefault(int(batch_time), Batch(int(batch_time)))
            batch.job_starts.append(event["Submission Time"])
            job_batch[event["Job ID"]] = batch.batch_ms
            for stage_id in event.get("Stage IDs", []):
                stage_batch[stage_id] = batch.batch_ms
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in job_batch:
            found[job_batch[event["Job ID"]]].job_ends.append(event["Completion Time"])
        elif kind == "SparkListenerTaskEnd":
            metrics = event.get("Task Metrics") or {}
            tasks.setdefault(event["Stage ID"], []).append((
                metrics.get("Executor Run Time", 0),
                metrics.get("Executor CPU Time", 0) / 1e6,  # nanoseconds
                (event.get("Task Info") or {}).get("Executor ID", "?"),
            ))  # fmt: skip
        elif kind == "SparkListenerStageCompleted":
            stage = _stage(event["Stage Info"], tasks)
            if stage is not None and stage.stage_id in stage_batch:
                found[stage_batch[stage.stage_id]].stages.append(stage)
    return found


def _stage(info: dict[str, Any], tasks: dict[int, list[tuple[int, float, str]]]) -> Stage | None:
    """A completed stage with its tasks' times (None: it did not run, or failed)."""
    if "Completion Time" not in info or "Submission Time" not in info or info.get("Failure Reason"):
        return None
    stage = Stage(
        info["Stage ID"], info["Stage Name"], info["Number of Tasks"],
        info["Submission Time"], info["Completion Time"],
        [rdd["Name"] for rdd in info.get("RDD Info", [])],
    )  # fmt: skip
    for run_ms, cpu_ms, executor in tasks.pop(stage.stage_id, []):
        stage.task_run_ms += run_ms
        stage.task_cpu_ms += cpu_ms
        stage.executors.add(executor)
    return stage


def timeline(batch: Batch) -> dict[str, Any]:
    """One batch's window (first job's start to last job's end), the time some stage ran,
    and the rest: the driver's own between jobs (milliseconds)."""
    start, end = min(batch.job_starts), max(batch.job_ends or batch.job_starts)
    running = union_ms((s.submitted_ms, s.completed_ms) for s in batch.stages)
    reading = union_ms((s.submitted_ms, s.completed_ms) for s in batch.stages if reads(s))
    return {"jobs": len(batch.job_starts), "window_ms": end - start, "stages_ms": running,
            "read_ms": reading, "driver_gap_ms": end - start - running}  # fmt: skip


def reads(stage: Stage) -> bool:
    """Whether a stage reads the Kafka ranges (the source's `sc.parallelize(ranges)`): its
    tasks are as many as the topic's partitions, whatever the executors."""
    return "ParallelCollectionRDD" in stage.rdds


def label(stage: Stage) -> str:
    """A stage's kind: its call site's last part (PySpark names many stages by py4j's
    `call at .../clientserver.py:644`) and the kinds of RDD it computes, which tell the
    steps apart (ParallelCollectionRDD: the Kafka ranges read; a union of the state and
    the batch: the state's update)."""
    site = stage.name.split(" at ", 1)
    where = site[1].rsplit("/", 1)[-1] if len(site) == 2 else ""
    return f"{site[0]} at {where}: " + "+".join(sorted(set(stage.rdds)))


def stage_kinds(chosen: list[Batch]) -> list[dict[str, Any]]:
    """The stages of the batches chosen, grouped by kind (`label`), in the order they first
    ran: tasks a stage, its median duration, its tasks' summed run and CPU time a batch
    (the executor JVM's CPU: the Python workers' own is not in it), the executors its
    tasks ran on, and in how many batches it ran."""
    groups: dict[str, list[Stage]] = {}
    for batch in chosen:
        for stage in sorted(batch.stages, key=lambda s: (s.submitted_ms, s.stage_id)):
            groups.setdefault(label(stage), []).append(stage)
    return [
        {
            "name": name,
            "tasks": sorted({s.tasks for s in stages}),
            "batches": len(stages),
            "duration_ms": _median([s.duration_ms for s in stages]),
            "task_run_ms": _median([s.task_run_ms for s in stages]),
            "task_cpu_ms": _median([round(s.task_cpu_ms) for s in stages]),
            "executors": sorted(set().union(*(s.executors for s in stages))),
            "rdds": stages[0].rdds[:4],
        }
        for name, stages in groups.items()
    ]


def summary(found: dict[int, Batch], batch_times: list[int]) -> dict[str, Any]:
    """The chosen batches' timelines (medians) and their stages by kind; which ran one task."""
    chosen = [found[t] for t in batch_times if t in found and found[t].job_starts]
    lines = [timeline(b) for b in chosen]
    kinds = stage_kinds(chosen)
    return {
        "batches": len(chosen),
        **{key: _median([line[key] for line in lines]) for key in
           ("jobs", "window_ms", "stages_ms", "read_ms", "driver_gap_ms")},
        "stages": kinds,
        "one_task_stages": [k["name"] for k in kinds if k["tasks"] == [1]],
    }  # fmt: skip


def _median(values: list[int]) -> int:
    ordered = sorted(values)
    if not ordered:
        return 0
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) // 2
