"""Run streaming-app as a real subprocess (driver + JVM), kill it, and read its output."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from streaming_app.sinks.files_layout import SUCCESS_MARKER, batch_of, read_totals, read_totals_dir
from streaming_app.tools.processes import kill_group

T = TypeVar("T")


class Process(Protocol):
    """What a wait watches besides its condition: a process that must not end first."""

    def poll(self) -> int | None: ...


def wait_for(
    what: str,
    check: Callable[[], T],
    timeout: float = 90,
    app: App | None = None,
    pause: float = 0.2,
    detail: Callable[[], str] | None = None,
    proc: Process | None = None,
) -> T:
    """Poll `check` every `pause` s until it returns something true, and return that.

    Fails naming `what` when `timeout` s pass first, or at once when `app` (or `proc`)
    ends first; the message ends with `detail()` (what was last seen) and the app's log.
    The one wait of the integration tests: a test waits on a condition, never on a sleep.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        ended = [p.poll() for p in (app.proc if app else None, proc) if p is not None]
        if any(code is not None for code in ended) or time.monotonic() >= deadline:
            code = next((c for c in ended if c is not None), None)
            head = (
                f"ended (exit code {code}) while waiting for {what}"
                if code is not None
                else f"timed out after {timeout:g} s waiting for {what}"
            )
            tail = [detail()] if detail is not None else []
            if app is not None:
                tail.append(app.log()[-4000:])
            raise AssertionError("\n".join([head, *tail]))
        time.sleep(pause)


# A small, fixed vocabulary keeps totals easy to eyeball when a test fails.
VOCABULARY = [f"w{i:02d}" for i in range(40)]


def truth(texts: list[str]) -> dict[str, int]:
    """Ground truth computed without the app's tokenizer: inputs are space-separated words."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(text.split())
    return dict(counts)


def make_text(rng: random.Random, lines: int, words: int = 8) -> str:
    """Random lines over VOCABULARY."""
    return "".join(" ".join(rng.choices(VOCABULARY, k=words)) + "\n" for _ in range(lines))


def text_lines(rng: random.Random, lines: int) -> list[str]:
    """`make_text`'s lines, as a list."""
    return make_text(rng, lines).splitlines()


def drop_file(input_dir: Path, name: str, data: bytes, mtime_ms: int | None = None) -> None:
    """Move a new file into the watched directory atomically, with a fresh (or given) mtime."""
    staging = input_dir.parent / (input_dir.name + ".staging")
    staging.mkdir(exist_ok=True)
    temp = staging / name
    temp.write_bytes(data)
    if mtime_ms is not None:
        os.utime(temp, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    os.rename(temp, input_dir / name)


def drop_file_for_next_batch(input_dir: Path, name: str, data: bytes, batch_ms: int) -> int:
    """Drop a file that the files source reads in a known batch; returns that batch time.

    Its mtime is set half an interval before the batch after next: the next batch skips
    it (a modification time after the batch time), that one reads it, whether the app is
    running or replays the batch after a restart.
    """
    now = int(time.time() * 1000)
    batch = (now // batch_ms + 2) * batch_ms
    drop_file(input_dir, name, data, mtime_ms=batch - batch_ms // 2)
    return batch


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# A progress line's scheduling delay (streaming_app.common.metrics_recorder.progress_line).
SCHEDULING_DELAY = re.compile(r"\bscheduling_delay=(\d+\.\d+)s")


class EveryPause(threading.Thread):
    """Calls step() every `pause` seconds until stopped; keeps what the steps wrote."""

    def __init__(self, pause: float) -> None:
        super().__init__(daemon=True)
        self.pause = pause
        self.written: list[str] = []
        self.steps = 0  # writes done
        self.halt = threading.Event()

    def step(self) -> list[str]:
        """One write; returns what it wrote (lines or texts)."""
        raise NotImplementedError

    def run(self) -> None:
        while not self.halt.is_set():
            self.written.extend(self.step())
            self.steps += 1
            self.halt.wait(self.pause)

    def wait_steps(self, steps: int = 1, timeout: float = 60) -> None:
        """Wait until `steps` more writes are done than now (input that arrived while an
        app was down, say)."""
        until = self.steps + steps
        wait_for(f"{steps} more writes", lambda: self.steps >= until, timeout)

    def stop(self, timeout: float = 60) -> list[str]:
        """Stop after the step in progress; everything written."""
        self.halt.set()
        self.join(timeout=timeout)
        assert not self.is_alive()
        return self.written


class App:
    """One `streaming-app run` (or COMMAND) process in its own session (kill -9 takes its JVM)."""

    def __init__(
        self,
        args: list[str],
        workdir: Path,
        name: str,
        command: str = "run",
        env: dict[str, str] | None = None,
        prefix: list[str] | None = None,
    ) -> None:
        self.log_path = workdir / f"{name}.log"
        self.out_path = workdir / f"{name}.out"
        extra = env or {}  # the test's own settings (STREAMING_APP_* included)
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONUNBUFFERED="1")
        env = {k: v for k, v in env.items() if not k.startswith("STREAMING_APP_")}
        env.update(extra)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in wait/kill)
        self._out = open(self.out_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            # `prefix` runs it elsewhere: `ip netns exec HOST` (execs, so the pid is the app's).
            [*(prefix or []), sys.executable, "-m", "streaming_app", command, *args],
            stdout=self._out,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    def log(self) -> str:
        """Everything the process wrote to stderr so far."""
        return self.log_path.read_text("utf-8", errors="replace")

    def metrics_port(self, timeout: float = 90) -> int:
        """The port of the app's Prometheus endpoint, as it logs it (`--metrics-port 0`)."""
        logged = self.wait_for_log(
            r"Prometheus metrics at http://127\.0\.0\.1:(\d+)/metrics", timeout
        )
        return int(logged[1])

    def wait_for_log(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        """Wait until stderr matches `pattern`; fail with the log if the process dies first."""
        return wait_for(
            f"{pattern!r} in its log", lambda: re.search(pattern, self.log()), timeout, self
        )

    def wait_caught_up(self, timeout: float = 180, batches: int = 3) -> None:
        """Wait until the last `batches` progress lines each show a scheduling delay under 1 s.

        A recovered app replays every interval since its last checkpoint; a graceful stop
        finishes them all, so tests that stop it gracefully let it catch up first. (One
        line is not enough: the first replayed batch starts with no delay.)
        """

        def caught_up(log: str) -> bool:
            delays = [float(d) for d in SCHEDULING_DELAY.findall(log)]
            return len(delays) >= batches and max(delays[-batches:]) < 1

        wait_for("the app to catch up", lambda: caught_up(self.log()), timeout, self, 0.5)

    def kill9(self) -> None:
        """SIGKILL the driver and its JVM (the whole session) at once, then reap them."""
        if not kill_group(self.proc):
            raise AssertionError("processes of the killed app are still alive")
        self._close()

    def terminate(self, timeout: float = 120) -> int:
        """SIGTERM the driver (as a supervisor would) and return its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float = 120) -> int:
        """Wait for the process to exit; kill it (and fail) if it does not."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            raise AssertionError("app did not exit in time:\n" + self.log()[-4000:]) from None
        self._close()
        return code

    def stop_if_running(self) -> None:
        """Clean-up for tests that failed half-way."""
        if self.proc.poll() is None:
            kill_group(self.proc)
        self._close()

    def _close(self) -> None:
        self._log.close()
        self._out.close()


# What Spark or Python print for a fault nobody handled.
TRACES = ("Traceback", "JobScheduler", "at org.apache", "Exception in thread")


def output_without_traces(app: App) -> str:
    """The app's stderr and stdout, after checking they hold no trace of an unhandled fault."""
    output = app.log() + app.out_path.read_text("utf-8")
    for trace in TRACES:
        assert trace not in output, output[-4000:]
    return output


def assert_no_password_at_rest(
    at_rest: list[Path], passwords: list[str], topic: str, *apps: App, found_in: str = ""
) -> None:
    """No file under `at_rest` holds a password, read decoded; the search does read them:
    it finds the topic in a file whose finding names `found_in` (a path's part, a layer);
    nor does any app's output hold one."""
    from tests.secrets_scan import find_secrets

    assert find_secrets(at_rest, passwords) == []
    seen = find_secrets(at_rest, [topic])
    assert any(found_in in line for line in seen), seen
    for app in apps:
        output = output_without_traces(app)
        assert [n for n, p in enumerate(passwords) if p in output] == []


def wait_for_totals_of(
    what: str,
    read: Callable[[], dict[str, Any]],
    expected: dict[str, Any],
    app: App | None = None,
    timeout: float = 90,
) -> dict[str, Any]:
    """Poll `read` (totals by key) until it returns `expected`; fail naming `what`, with
    the totals that differ as (seen, expected) by key."""
    seen: dict[str, Any] = {}

    def reached() -> bool:
        nonlocal seen
        seen = read()
        return seen == expected

    def differ() -> str:
        keys = set(seen) | set(expected)
        diff = {k: (seen.get(k), expected.get(k)) for k in keys if seen.get(k) != expected.get(k)}
        return f"totals differ (seen, expected): {diff}"

    wait_for(what, reached, timeout, app, 0.3, differ)
    return seen


def wait_for_totals(
    output_dir: Path, expected: dict[str, int], app: App | None = None, timeout: float = 90
) -> dict[str, int]:
    """Poll `streaming-app totals`' data until it equals `expected`; fail with the last seen."""

    def read() -> dict[str, Any]:
        return read_totals(str(output_dir))[1] if output_dir.exists() else {}

    return wait_for_totals_of("the expected totals", read, expected, app, timeout)


def cli_totals(workdir: Path, output_dir: Path, name: str) -> dict[str, int]:
    """What this version's `streaming-app totals --output-dir DIR` prints, parsed."""
    app = App(["--output-dir", str(output_dir)], workdir, name, command="totals")
    assert app.wait(timeout=60) == 0, app.log()
    totals = {}
    for line in app.out_path.read_text("utf-8").splitlines():
        key, value = line.split("\t")
        totals[key] = int(value)
    return totals


class LineServer:
    """A test TCP server on loopback: sends given lines to each client, then keeps it open."""

    def __init__(self, lines: list[str], port: int = 0) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.lines = lines
        self.clients = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.clients += 1
            with conn:
                conn.sendall("".join(line + "\n" for line in self.lines).encode("utf-8"))
                self.lines = []  # a reconnecting receiver must not get them twice
                conn.settimeout(0.2)
                while not self._stop.is_set():  # until the receiver hangs up
                    try:
                        if not conn.recv(1024):
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break

    def close(self) -> None:
        """Stop serving."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def window_outputs(output_dir: Path) -> dict[int, dict[str, Any]]:
    """Every complete window the files sink kept, by the batch time it ends at."""
    found = {}
    for path in output_dir.iterdir():
        end = batch_of(path.name, "window")
        if end is not None and (path / SUCCESS_MARKER).exists():
            found[end] = read_totals_dir(str(path))
    return found


def windows_of(
    batches: dict[int, list[str]], ends: list[int], window_ms: int
) -> dict[int, dict[str, int]]:
    """Each window ending at a batch time in `ends`, from the texts each batch read."""
    return {
        end: truth([t for b, texts in batches.items() if end - window_ms < b <= end for t in texts])
        for end in ends
    }
