"""`streaming-app supervise`: restart a crashed driver with backoff, stop on a crash loop.

The driver's exit code says what to do (streaming_app.errors): a crash (1, or death by a
signal such as kill -9) is restarted; everything else ends the supervisor with the same
code, because restarting would fail the same way (2 usage, 3 checkpoint, 4 data lost) or
because the stop was asked for (0, 130). SIGTERM and SIGINT are forwarded to the driver,
which then stops gracefully; a second one is forwarded too and makes it exit at once.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType

from streaming_app.errors import EXIT_CRASH, EXIT_OK

log = logging.getLogger("streaming_app.tools.supervise")

# Exit code of the supervisor when it gives up on a crash loop.
EXIT_CRASH_LOOP = EXIT_CRASH
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Policy:
    """When to restart: backoff doubles per recent crash; N crashes in the window stop it."""

    max_failures: int = 5
    failure_window: float = 300.0
    backoff: float = 1.0
    max_backoff: float = 60.0


def is_crash(code: int) -> bool:
    """Whether an exit code (negative: killed by that signal) asks for a restart."""
    return code == EXIT_CRASH or code < 0


def describe(code: int) -> str:
    """`exit code 1` or `killed by SIGKILL`."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the supervisor dies (Linux), so no driver is orphaned."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class Supervisor:
    """Runs `command` until it ends without crashing, a stop is requested, or it crash-loops."""

    def __init__(
        self,
        command: Sequence[str],
        policy: Policy,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.command = list(command)
        self.policy = policy
        self.clock = clock
        self.crashes: deque[float] = deque()
        self.starts = 0
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()
        # Re-entrant: the signal handler takes it in the main thread, which may hold it.
        self._lock = threading.RLock()

    def install_signals(self) -> None:
        """Forward SIGTERM/SIGINT to the driver (main thread only)."""
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.stopping.set()
        with self._lock:
            child = self.child
        if child is not None and child.poll() is None:
            log.info("%s: passing it to the driver (pid %d)", name, child.pid)
            child.send_signal(signum)
        else:
            log.info("%s: not restarting", name)

    def next_delay(self) -> float:
        """Seconds to wait before the next start, given the crashes in the window."""
        recent = len(self.crashes)
        if recent == 0:
            return 0.0
        return float(min(self.policy.backoff * 2 ** (recent - 1), self.policy.max_backoff))

    def record_crash(self) -> bool:
        """Count a crash now; True if that makes a crash loop."""
        now = self.clock()
        self.crashes.append(now)
        while self.crashes and now - self.crashes[0] > self.policy.failure_window:
            self.crashes.popleft()
        return len(self.crashes) >= self.policy.max_failures

    def start_child(self) -> subprocess.Popen[bytes]:
        """Start the driver in its own process group (a terminal's Ctrl-C reaches us only)."""
        self.starts += 1
        child = subprocess.Popen(self.command, start_new_session=True, preexec_fn=_die_with_parent)
        with self._lock:
            self.child = child
        log.info("started driver pid %d (start %d)", child.pid, self.starts)
        return child

    def run(self) -> int:
        """Supervise until done; returns the exit code for the supervisor itself."""
        while True:
            if self.stopping.is_set():
                return EXIT_OK
            child = self.start_child()
            if self.stopping.is_set():  # a signal came in while it was being started
                child.send_signal(signal.SIGTERM)
            code = self._wait(child)
            if self.stopping.is_set():
                log.info("driver stopped on request (%s)", describe(code))
                return code if code >= 0 else EXIT_OK
            if not is_crash(code):
                log.info("driver ended with %s: not restarting", describe(code))
                return code
            if self.record_crash():
                log.error(
                    "crash loop: the driver crashed %d times within %g s (last: %s); not "
                    "restarting. Read its log above, fix the cause and start again",
                    len(self.crashes),
                    self.policy.failure_window,
                    describe(code),
                )
                return EXIT_CRASH_LOOP
            delay = self.next_delay()
            log.warning(
                "driver crashed (%s); restarting in %g s (%d crash%s in the last %g s, "
                "a crash loop at %d)",
                describe(code),
                delay,
                len(self.crashes),
                "" if len(self.crashes) == 1 else "es",
                self.policy.failure_window,
                self.policy.max_failures,
            )
            if self.stopping.wait(delay):
                log.info("stop requested while waiting to restart")
                return EXIT_OK

    def _wait(self, child: subprocess.Popen[bytes]) -> int:
        while True:
            try:
                return child.wait()
            except InterruptedError:  # pragma: no cover (PEP 475 retries for us)
                continue


def run_command(run_args: Sequence[str]) -> list[str]:
    """The driver's command line: this interpreter running `streaming-app run ARGS`."""
    return [sys.executable, "-m", "streaming_app", "run", *run_args]


def supervise(run_args: Sequence[str], policy: Policy) -> int:
    """Entry point of the CLI command."""
    supervisor = Supervisor(run_command(run_args), policy)
    supervisor.install_signals()
    # The arguments are not logged: --spark-conf values may be credentials.
    log.info(
        "supervising `streaming-app run`: restart on crash, backoff %g-%g s, stop after "
        "%d crashes within %g s",
        policy.backoff,
        policy.max_backoff,
        policy.max_failures,
        policy.failure_window,
    )
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return supervisor.run()
