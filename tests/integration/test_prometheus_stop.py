"""Two real Prometheus servers (an HA pair) scrape the app every 30 s with the repository's
alert rules: a graceful stop and the next start page neither, a kill -9 after it pages both.

The stop lingers until every scraper seen lately has read `streaming_app_stopping 1`
(common/scrapers.py): at 30 s scrapes one scrape of ten seconds' wait is not enough, and
the second server of a pair reads the stop only if the app waits for it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import App, free_port
from tests.integration.log_lines import CONTEXT_RECOVERED, CONTEXT_STARTED
from tests.integration.prometheus_server import Prometheus

pytestmark = pytest.mark.timeout(600)

SCRAPE_S = 30  # as operators run it: Prometheus' own default is 60 s
EVALUATE_S = 5  # the shipped prometheus.yml's
FOR_S = 30  # StreamingAppDown's `for:`
UP = 'up{job="streaming-app"}'


def watch(pair: list[Prometheus], done: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll until `done`, failing as soon as either server has an alert pending or firing."""
    deadline = time.monotonic() + timeout
    while True:
        for server in pair:
            assert server.alerts() == [], f"{server.log.name} while {what}: {server.alerts()}"
        if done():
            return
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(1)


def on_both(pair: list[Prometheus], expr: str, value: float) -> Callable[[], bool]:
    """A check: the instant query `expr` is `value` on each server."""
    return lambda: all(server.value(expr) == value for server in pair)


def fires(server: Prometheus) -> Callable[[], bool]:
    """A check: StreamingAppDown fires on `server`."""
    return lambda: server.firing("StreamingAppDown")


def test_a_graceful_stop_and_a_start_page_neither_server_of_a_pair_and_a_kill_9_pages_both(
    dirs: dict[str, Path], tmp_path: Path, started: list[Any]
) -> None:
    port = free_port()
    run = files_args(dirs, "--metrics-port", str(port))
    app = App(run, tmp_path, "first")
    started.append(app)
    app.wait_for_log(CONTEXT_STARTED)
    # Started once the app answers: a target down before its first start is another case.
    pair = [
        Prometheus(
            tmp_path / f"prometheus-{replica}", f"127.0.0.1:{port}",
            scrape_s=SCRAPE_S, evaluate_s=EVALUATE_S, replica=replica,
        )
        for replica in ("a", "b")
    ]  # fmt: skip
    started.extend(pair)
    for server in pair:
        server.wait_ready()
    watch(pair, on_both(pair, UP, 1), "both servers scrape the app", 2 * SCRAPE_S + 15)

    stopping = time.monotonic()
    assert app.terminate(timeout=180) == 0, app.log()[-3000:]
    lingered = time.monotonic() - stopping
    assert "for a last scrape of the metrics by 127.0.0.1 Prometheus/" in app.log()
    # Each server read the stop before the port closed, however their scrapes fall.
    last_word = 'last_over_time(streaming_app_stopping{job="streaming-app"}[5m])'
    watch(pair, on_both(pair, UP, 0), "both servers find the driver gone", SCRAPE_S + 15)
    assert [server.value(last_word) for server in pair] == [1, 1]
    # Down for the alert's `for:` and two evaluations more: quiet on both servers.
    down = time.monotonic()
    watch(pair, lambda: time.monotonic() - down > FOR_S + 2 * EVALUATE_S, "stopped", 60)

    app = App(run, tmp_path, "second")
    started.append(app)
    app.wait_for_log(CONTEXT_RECOVERED)
    watch(pair, on_both(pair, UP, 1), "both servers scrape the new start", SCRAPE_S + 30)
    app.kill9()
    killed = time.monotonic()
    for server in pair:
        server.until(fires(server), "StreamingAppDown", 120)
    fired_after = time.monotonic() - killed
    # A failed scrape within one interval, then the `for:`, and two evaluations' slack.
    assert fired_after <= SCRAPE_S + FOR_S + 2 * EVALUATE_S + 5, fired_after
    print(f"the stop lingered {lingered:.1f} s; StreamingAppDown fired {fired_after:.1f} s later")
