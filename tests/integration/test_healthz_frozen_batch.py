"""`/healthz` fails on a frozen batch while the JVM answers, after its documented bound.

The app's Python workers (the executors' side of every batch, in local mode children of
the driver's JVM) stopped with SIGSTOP: the batch in flight waits on them, no task
completes, while the JVM and the driver's loop keep answering. `/healthz` turns 503 once
no batch, idle trigger or task completed for max(10 batch intervals, 120 s)
(common/health.py), not before; after SIGCONT it is 200 again and the run stops cleanly
with its totals. The bound is two minutes, so `slow`; CI's cases are the unit tests of
tests/unit/common/test_health.py:
`scripts/test.sh -m slow -n 0 tests/integration/test_healthz_frozen_batch.py`."""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.health import STALL_SECONDS
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, wait_for_totals
from tests.integration.log_lines import CONTEXT_STARTED
from tests.integration.test_prometheus_alerts import java_child

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def healthz(port: int) -> tuple[int, str]:
    """(status, body) of `/healthz`."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def python_workers(jvm: int) -> list[int]:
    """The Python processes under the JVM (PySpark's daemon and the workers it forked)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            parent = int(text.rsplit(")", 1)[1].split()[1])
            names[int(stat.parent.name)] = (stat.parent / "comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], list(children.get(jvm, []))
    while todo:
        pid = todo.pop()
        if names.get(pid, "").startswith("python"):
            found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def test_a_frozen_batch_fails_healthz_after_its_bound_and_recovers(
    dirs: dict[str, Path], start_app: Any
) -> None:
    app = start_app(*files_args(dirs), "--metrics-port", "0")
    port = app.metrics_port()
    app.wait_for_log(CONTEXT_STARTED)  # files there before the stream starts are not read
    drop_file(dirs["input"], "a.txt", b"alpha beta\n")
    wait_for_totals(dirs["output"], {"alpha": 1, "beta": 1}, app, timeout=120)
    assert healthz(port) == (200, "alive\n")
    jvm = java_child(app.proc.pid)
    workers = python_workers(jvm)
    assert workers, "no Python worker under the JVM"
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        # Every batch runs Python tasks (the state's update): the next one freezes.
        while healthz(port)[0] == 200:
            assert time.monotonic() - frozen < STALL_SECONDS + 60, "/healthz stayed 200"
            assert app.proc.poll() is None, app.log()[-3000:]
            time.sleep(1)
        took = time.monotonic() - frozen
        status, body = healthz(port)
        assert status == 503 and "no batch, idle trigger or task has completed" in body, body
        assert took >= STALL_SECONDS - 5, took  # not before its bound
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 60
    while healthz(port)[0] != 200:
        assert time.monotonic() < deadline, "/healthz stayed 503 after SIGCONT"
        time.sleep(1)
    drop_file(dirs["input"], "b.txt", b"alpha\n")
    wait_for_totals(dirs["output"], {"alpha": 2, "beta": 1}, app, timeout=120)
    assert app.terminate() == 0, app.log()[-3000:]
