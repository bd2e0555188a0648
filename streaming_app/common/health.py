"""Whether the driver is alive and ready, judged from its batch loop: `/healthz` and `/readyz`.

Engine-neutral, on the driver. The run's wait loop (lifecycle/stopping.py) beats here each
time the engine answers and hands over what the tasks of the running stages have done; the
metrics recorder says when a batch completed or a trigger found no new input, and the
retries say when a server stopped answering. The HTTP thread only reads: a `/healthz` that
answered from the HTTP thread alone would say "alive" through a frozen batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

# `/healthz` fails once the driver's loop (a wait of POLL_SECONDS on the stream) has not
# come round for this long: a frozen JVM, a deadlocked driver.
ALIVE_SECONDS = 30.0
# ... once the stream has not started this long after the process began to start: a start
# that hangs (a checkpoint's storage that never answers, a master that accepts nothing).
# A recovery's replay runs after the start: StreamingAppNotReady and `/readyz` watch it.
START_SECONDS = 600.0
# ... once the stream has not moved on (no batch completed, no idle trigger, no task of a
# running stage completed) for STALL_INTERVALS batch intervals and at least STALL_SECONDS:
# a frozen batch (a sink or an executor that hangs) while the JVM answers. Not while a run
# of retries waits on a server: the run's own *_give_up_after ends that.
STALL_SECONDS = 120.0
STALL_INTERVALS = 10
# How often the loop reads the running stages' tasks (Spark's status tracker, a few Py4J
# calls): often enough for the bounds above, rarely enough to cost nothing.
TASKS_EVERY_SECONDS = 5.0


class Health:
    """The driver's liveness and readiness, from what its loop, batches and retries report."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # monotonic seconds
        self._lock = threading.Lock()
        self._began = clock()  # the process began to start
        self._beat: float | None = None  # the loop last came round (None: not started)
        self._moved: float | None = None  # a batch, an idle trigger or a task last did
        self._interval: float | None = None  # the batch interval, seconds
        self._tasks: Hashable = None  # the running stages' tasks as last read
        self._tasks_read: float | None = None
        self._ready = False
        self._replaying: str | None = None
        self._retrying: dict[object, tuple[str, float]] = {}  # token: (peer, run began)

    def beat(self) -> None:
        """The driver's loop came round: a wait on the stream returned (the JVM answered)."""
        now = self._clock()
        with self._lock:
            if self._beat is None:
                self._moved = now  # the stream started: count a stall from here
            self._beat = now

    def moved(self, interval: float | None = None) -> None:
        """The stream moved on: a batch completed (`interval`: its batch interval, seconds)
        or a trigger found no new input."""
        with self._lock:
            self._moved = self._clock()
            if interval is not None:
                self._interval = interval

    def tasks_due(self) -> bool:
        """Whether the loop should read the running stages' tasks now."""
        with self._lock:
            read = self._tasks_read
        return read is None or self._clock() - read >= TASKS_EVERY_SECONDS

    def tasks(self, seen: Hashable) -> bool:
        """What the running stages' tasks have done, as the loop read it (stage ids and
        their completed tasks): True, and the stream moved on, when it changed since the
        last reading (a task completed, a stage began or ended)."""
        now = self._clock()
        with self._lock:
            changed = self._tasks_read is not None and seen != self._tasks
            self._tasks, self._tasks_read = seen, now
            if changed:
                self._moved = now
        return changed

    def ready(self) -> None:
        """The first batch after the start (after a recovery's replay) completed, or a
        trigger found no new input."""
        with self._lock:
            self._ready = True
            self._replaying = None

    def replaying(self, what: str) -> None:
        """A recovery replays `what` before the app is ready (said by `/readyz`)."""
        with self._lock:
            if not self._ready:
                self._replaying = what

    def replayed(self) -> None:
        """The replay is over; the first batch after it is still to complete."""
        with self._lock:
            self._replaying = None

    def retrying(self, peer: str) -> object:
        """A run of retries of calls to `peer` began; its token for `retried`."""
        token = object()
        with self._lock:
            self._retrying[token] = (peer, self._clock())
        return token

    def retried(self, token: object) -> None:
        """The run of retries `token` ended (the call succeeded, or the run gave up)."""
        with self._lock:
            self._retrying.pop(token, None)
            if self._beat is not None:
                self._moved = self._clock()

    def retrying_since(self, peer: str) -> float | None:
        """When the oldest run of retries of calls to `peer` still going on began."""
        with self._lock:
            starts = [began for name, began in self._retrying.values() if name == peer]
        return min(starts, default=None)

    def health(self) -> tuple[bool, str]:
        """`/healthz`: (alive, why), from the loop's beats and the stream's progress."""
        now = self._clock()
        with self._lock:
            if self._beat is None:
                starting = now - self._began
                if starting > START_SECONDS:
                    return False, (
                        f"the stream has not started in {starting:.0f} s "
                        f"(bound {START_SECONDS:.0f} s)"
                    )
                return True, "starting"
            quiet = now - self._beat
            if quiet > ALIVE_SECONDS:
                return False, f"the driver's loop has not come round for {quiet:.0f} s"
            if self._retrying:
                peer, since = min(self._retrying.values(), key=lambda run: run[1])
                return True, f"alive, retrying calls to {peer} for {now - since:.0f} s"
            still = now - (self._moved if self._moved is not None else self._beat)
            bound = max(STALL_INTERVALS * (self._interval or 0.0), STALL_SECONDS)
            if still > bound:
                return False, (
                    f"no batch, idle trigger or task has completed for {still:.0f} s "
                    f"(bound {bound:.0f} s): the batch in flight is frozen"
                )
            return True, "alive"

    def readiness(self) -> tuple[bool, str]:
        """`/readyz`: ready once the first batch after the start (after a recovery's
        replay) completed, or a trigger found no new input; else what it waits for."""
        with self._lock:
            if self._ready:
                return True, "ready"
            if self._replaying is not None:
                return False, f"replaying {self._replaying}"
            return False, "the first batch has not completed"


def running_tasks(sc: object) -> Hashable:
    """The running stages' ids and their completed tasks, from Spark's status tracker
    (public API, on the driver): what `Health.tasks` compares."""
    tracker = sc.statusTracker()  # type: ignore[attr-defined]
    seen = []
    for stage in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage)
        if info is not None:
            seen.append((stage, info.currentAttemptId, info.numCompletedTasks))
    return tuple(seen)
