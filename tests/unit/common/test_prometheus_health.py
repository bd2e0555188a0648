"""The endpoint's series of progress and health: tasks, runs of retries, a structured replay."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from streaming_app.common import prometheus
from streaming_app.common.health import TASKS_EVERY_SECONDS
from streaming_app.common.metrics_recorder import MetricsRecorder
from streaming_app.common.prometheus import Endpoint, start_endpoint, stop_endpoint
from tests.unit.common.test_prometheus import INFO, batch, get, samples


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_task_completing_is_served_as_progress_the_same_tasks_are_not() -> None:
    clock = Clock()
    served = Endpoint(INFO, clock=clock)
    served.tasks(((4, 0, 1),))  # the first reading: nothing to compare with
    served.tasks(((4, 0, 1),))
    assert ("streaming_app_last_task_completed_timestamp_seconds", ()) not in samples(served)
    before = time.time()
    served.tasks(((4, 0, 2),))
    assert samples(served)[("streaming_app_last_task_completed_timestamp_seconds", ())] >= before


def test_the_loops_beat_reads_the_tasks_every_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    served = start_endpoint("127.0.0.1", 0, INFO)
    clock = Clock()
    monkeypatch.setattr(served.health, "_clock", clock)
    reads = []

    def tasks() -> tuple[int, ...]:
        reads.append(clock.now)
        return (len(reads),)

    try:
        for _ in range(int(3 * TASKS_EVERY_SECONDS / 0.5)):
            clock.now += 0.5
            prometheus.beat(tasks)
        assert len(reads) == 3
        assert ("streaming_app_last_task_completed_timestamp_seconds", ()) in samples(served)
    finally:
        stop_endpoint()


def test_a_run_of_retries_is_served_while_it_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming_app.common.retry as retry

    served = start_endpoint("127.0.0.1", 0, INFO)
    seen: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []
    outcomes = iter([ConnectionError("down"), ConnectionError("down"), "ok"])

    def call() -> str:
        seen.append(samples(served))
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(retry, "BACKOFF_FIRST_SECONDS", 0.01)
    key = ("streaming_app_retrying_since_timestamp_seconds", (("peer", "postgres"),))
    try:
        before = time.time()
        assert retry.with_retries("writing", call, threading.Event(), peer="postgres") == "ok"
        assert key not in seen[0]  # before the first failure
        assert before <= seen[1][key] == seen[2][key] <= time.time()  # one run, from its start
        assert key not in samples(served)  # the call succeeded: the run is over
        assert get(served._server.server_address[1], "/healthz")[0] == 200
    finally:
        stop_endpoint()


def test_a_restarted_query_is_not_ready_until_the_micro_batch_after_its_replay() -> None:
    served = start_endpoint("127.0.0.1", 0, INFO)
    port = served._server.server_address[1]
    try:
        prometheus.replaying("micro-batch 7 (planned, not committed before the restart)", 7)
        assert get(port, "/readyz") == (
            503,
            "replaying micro-batch 7 (planned, not committed before the restart)\n",
        )
        recorder = MetricsRecorder(None, progress=False)
        recorder.record(replace(batch(10_000), engine="structured", batch_id=7))
        assert samples(served)[("streaming_app_ready", ())] == 0
        assert get(port, "/readyz") == (503, "the first batch has not completed\n")
        recorder.record(replace(batch(12_000), engine="structured", batch_id=8))  # its backlog
        assert samples(served)[("streaming_app_ready", ())] == 1
        assert get(port, "/readyz") == (200, "ready\n")
    finally:
        stop_endpoint()
