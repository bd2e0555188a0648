"""`/healthz` and `/readyz` judged from the batch loop, with an injected clock."""

from __future__ import annotations

from types import SimpleNamespace

from streaming_app.common.health import (
    ALIVE_SECONDS,
    STALL_INTERVALS,
    STALL_SECONDS,
    START_SECONDS,
    TASKS_EVERY_SECONDS,
    Health,
    running_tasks,
)


class Clock:
    """Monotonic seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def run_loop(health: Health, clock: Clock, seconds: float, tasks: list[int] | None = None) -> None:
    """The driver's loop for `seconds`: a beat every 0.5 s, the tasks read when due (one
    more task completed at each reading when `tasks` is given, the same ones when not)."""
    end = clock.now + seconds
    while clock.now < end:
        clock.now += 0.5
        health.beat()
        if health.tasks_due():
            if tasks is not None:
                tasks[0] += 1
            health.tasks(((7, 0, tasks[0] if tasks is not None else 3),))


def test_a_start_that_hangs_before_the_stream_starts_fails_after_start_seconds() -> None:
    clock = Clock()
    hung, started = Health(clock), Health(clock)
    clock.now += START_SECONDS - 1
    assert hung.health() == (True, "starting")
    started.beat()  # the positive control: this one's stream started in time
    clock.now += 2
    ok, why = hung.health()
    assert not ok and why == "the stream has not started in 601 s (bound 600 s)"
    assert started.health() == (True, "alive")


def test_a_loop_that_stops_coming_round_fails() -> None:
    clock = Clock()
    health = Health(clock)
    run_loop(health, clock, 10)
    assert health.health() == (True, "alive")
    clock.now += ALIVE_SECONDS + 1  # the JVM froze: the wait on the stream never returns
    assert health.health() == (False, "the driver's loop has not come round for 31 s")


def test_a_frozen_batch_fails_after_its_bound_a_long_batch_whose_tasks_complete_does_not() -> None:
    clock = Clock()
    frozen, long_batch = Health(clock), Health(clock)
    for health in (frozen, long_batch):
        health.beat()
        health.moved(interval=2.0)  # a batch completed: the bound is max(10 x 2 s, 120 s)
    tasks = [0]

    def both(seconds: float) -> None:
        end = clock.now + seconds
        while clock.now < end:
            clock.now += 0.5
            frozen.beat()  # the JVM answers, but the batch in flight moves no more
            frozen.tasks(((7, 0, 3),)) if frozen.tasks_due() else None
            long_batch.beat()  # a batch of minutes: a task completes every 5 s
            if long_batch.tasks_due():
                tasks[0] += 1
                long_batch.tasks(((7, 0, tasks[0]),))

    both(STALL_SECONDS - 1)
    assert frozen.health() == (True, "alive")
    both(2)
    ok, why = frozen.health()
    assert not ok and "no batch, idle trigger or task has completed for 121 s" in why, why
    assert "(bound 120 s)" in why
    assert long_batch.health() == (True, "alive")


def test_the_stall_bound_grows_with_the_batch_interval() -> None:
    clock = Clock()
    health = Health(clock)
    health.beat()
    health.moved(interval=30.0)
    run_loop(health, clock, STALL_INTERVALS * 30.0 - 1)
    assert health.health() == (True, "alive")
    run_loop(health, clock, 2)
    assert not health.health()[0]


def test_a_run_of_retries_is_no_stall_and_the_stall_counts_from_its_end() -> None:
    clock = Clock()
    health = Health(clock)
    health.beat()
    token = health.retrying("postgres")
    run_loop(health, clock, STALL_SECONDS + 60)  # a database down for 3 minutes
    assert health.health() == (True, "alive, retrying calls to postgres for 180 s")
    assert health.retrying_since("postgres") == 1_000.0
    health.retried(token)
    assert health.retrying_since("postgres") is None
    run_loop(health, clock, STALL_SECONDS - 1)
    assert health.health() == (True, "alive")
    run_loop(health, clock, 2)
    assert not health.health()[0]


def test_the_tasks_are_read_every_few_seconds_and_a_change_is_progress() -> None:
    clock = Clock()
    health = Health(clock)
    assert health.tasks_due()
    assert not health.tasks(((1, 0, 0),))  # the first reading: nothing to compare
    clock.now += TASKS_EVERY_SECONDS - 1
    assert not health.tasks_due()
    clock.now += 1
    assert health.tasks_due()
    assert not health.tasks(((1, 0, 0),))
    assert health.tasks(((1, 0, 1),))  # a task completed
    assert health.tasks(())  # the stage ended


def test_readiness_says_the_replay_then_the_first_batch_then_ready() -> None:
    health = Health(Clock())
    assert health.readiness() == (False, "the first batch has not completed")
    health.replaying("micro-batch 4 (planned, not committed before the restart)")
    assert health.readiness() == (
        False,
        "replaying micro-batch 4 (planned, not committed before the restart)",
    )
    health.replayed()
    assert health.readiness() == (False, "the first batch has not completed")
    health.ready()
    assert health.readiness() == (True, "ready")
    health.replaying("too late")  # ready stays ready
    assert health.readiness() == (True, "ready")


def test_running_tasks_reads_the_status_tracker() -> None:
    stages = {
        3: SimpleNamespace(currentAttemptId=0, numCompletedTasks=5),
        1: SimpleNamespace(currentAttemptId=1, numCompletedTasks=2),
    }
    tracker = SimpleNamespace(
        getActiveStageIds=lambda: [3, 1, 9], getStageInfo=lambda stage: stages.get(stage)
    )
    sc = SimpleNamespace(statusTracker=lambda: tracker)
    assert running_tasks(sc) == ((1, 1, 2), (3, 0, 5))
