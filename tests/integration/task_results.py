"""What the driver received from its tasks, read from Spark's event log: each result's size."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.harness import wait_for


def event_log_settings(directory: Path) -> dict[str, str]:
    """A session's settings that make it write its event log, plain JSON lines, into `directory`."""
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": directory.as_uri(),
        "spark.eventLog.compress": "false",  # on by default since Spark 4.0
        "spark.eventLog.rolling.enabled": "false",
    }


# What one accumulator update (a task metric: Spark's, a SQL operator's) may add to a task's
# result, serialized: 110-190 bytes each, measured on Spark 4.3 (up to 90 a task).
METRIC_BYTES = 200


@dataclass(frozen=True)
class Received:
    """The tasks of some jobs and the bytes their results brought to the driver."""

    jobs: int
    tasks: int
    result_bytes: int  # the sum of the tasks' "Result Size" (value and metrics, serialized)
    largest_value: int  # the most a task's result holds beyond METRIC_BYTES a metric
    widest_job: int  # the most tasks of one job

    def __str__(self) -> str:
        return (
            f"{self.result_bytes} bytes in {self.tasks} task results of {self.jobs} jobs "
            f"(at most {self.largest_value} beyond a task's metrics; "
            f"at most {self.widest_job} tasks a job)"
        )


def _events(directory: Path) -> list[dict[str, Any]]:
    """Every event of the application's (one) log written so far, in order."""
    logs = [p for p in directory.iterdir() if p.is_file()]
    assert len(logs) == 1, logs
    events = []
    with logs[0].open(encoding="utf-8") as lines:
        for line in lines:
            if line.endswith("\n"):  # a last line still being written is left for later
                events.append(json.loads(line))
    return events


def received(directory: Path, job_ids: Iterable[int], timeout: float = 60) -> Received:
    """What the tasks of `job_ids` (ended jobs) returned to the driver, once the event log
    holds the end of every one of them (the log is written by a listener, after the job)."""
    wanted = set(job_ids)
    ended: set[int] = set()

    def all_ended() -> list[dict[str, Any]] | None:
        nonlocal ended
        events = _events(directory)
        ended = {e["Job ID"] for e in events if e["Event"] == "SparkListenerJobEnd"}
        return events if wanted <= ended else None

    def missing() -> str:
        return f"jobs {sorted(wanted - ended)} not in the event log"

    events = wait_for("the end of every job in the event log", all_ended, timeout, detail=missing)
    job_of: dict[int, int] = {}  # a stage's first job (a skipped stage runs no task again)
    for e in events:
        if e["Event"] == "SparkListenerJobStart" and e["Job ID"] in wanted:
            for stage in e["Stage IDs"]:
                job_of.setdefault(stage, e["Job ID"])
    sizes, values, per_job = [], [], Counter[int]()
    for e in events:
        if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] in job_of:
            if e.get("Task Metrics") is None:  # a task that failed before it returned
                continue
            size = e["Task Metrics"]["Result Size"]
            sizes.append(size)
            values.append(size - METRIC_BYTES * len(e["Task Info"].get("Accumulables", [])))
            per_job[job_of[e["Stage ID"]]] += 1
    widest = max(per_job.values(), default=0)
    return Received(len(wanted), len(sizes), sum(sizes), max(values, default=0), widest)
