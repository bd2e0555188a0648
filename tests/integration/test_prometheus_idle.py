"""A healthy app idle for 30 minutes, snapshots on, under a real Prometheus scraping and
evaluating the shipped rules every 30 s, pages nothing, both engines. The structured engine
writes its snapshots only inside micro-batches, so its newest snapshot grows old by the
clock while the app is healthy: the run checks that it did (what a rule measured by the
clock would have paged on) beside the silence of the rules, which measure it against the
batches.

About 32 minutes an engine, so `slow`:
`scripts/test.sh -m slow -n 2 tests/integration/test_prometheus_idle.py` (both engines at
once)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, free_port, wait_for_totals
from tests.integration.prometheus_server import Prometheus
from tests.integration.test_prometheus_quiet import AlertWatch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]

IDLE_S = 30 * 60
SCRAPE_S = 30  # scrapes and rule evaluations, as operators run them
# The newest snapshot's age by the clock beyond which a rule measured by the clock (the
# rule before issue 56: 3 intervals of 10 s, at least 15 minutes) went pending.
CLOCK_RULE_S = 900


@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_a_healthy_app_idle_for_30_minutes_under_30_s_scrapes_pages_nothing(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path, engine: str
) -> None:
    port = free_port()
    # Snapshots every 10 s (common_args), batches every second.
    app = start_app(*files_args(dirs, "--engine", engine), "--metrics-port", str(port))
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}", scrape_s=SCRAPE_S)
    watch = None
    try:
        prometheus.wait_ready()
        watch = AlertWatch(prometheus)
        ready = 'streaming_app_ready{job="streaming-app"}'
        prometheus.until(lambda: prometheus.value(ready) == 1, "ready", 240)
        drop_file(dirs["input"], "a.txt", b"alpha beta\n")
        wait_for_totals(dirs["output"], {"alpha": 1, "beta": 1}, app, timeout=120)
        idle_from = time.monotonic()
        # Idle for IDLE_S; fail at once if the app dies or an alert shows up.
        prometheus.until(
            lambda: (
                bool(watch.seen)
                or app.proc.poll() is not None
                or time.monotonic() - idle_from >= IDLE_S
            ),
            "30 minutes idle",
            IDLE_S + 60,
        )
        assert app.proc.poll() is None, app.log()[-3000:]
        watch.stop()
        assert watch.seen == [], watch.seen
        assert watch.reads >= IDLE_S * 0.9, watch.reads  # it read the alerts all along
        # The rules were loaded and evaluated with the app's series in them.
        assert prometheus.value('streaming_app_snapshot_interval_seconds{job="streaming-app"}')
        groups = prometheus.api("rules")["groups"]
        health = [rule["health"] for group in groups for rule in group["rules"]]
        assert len(health) >= 13 and set(health) == {"ok"}, groups
        age = prometheus.value(
            'time() - max(streaming_app_last_success_timestamp_seconds{operation="snapshot"})'
        )
        assert age is not None
        if engine == "structured":  # no micro-batch, no snapshot: old by the clock
            assert age > CLOCK_RULE_S, age
        else:  # DStreams run a batch every interval, idle or not, and snapshot in them
            assert age < 60, age
        assert app.terminate() == 0, app.log()[-3000:]
    finally:
        if watch is not None:
            watch.stop()
        prometheus.stop()
