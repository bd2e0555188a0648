"""A real Prometheus server (Debian's `prometheus`) scrapes the app under `supervise` with the
repository's alert rules: it finds the series with the app's values, and StreamingAppDown
fires after a kill -9 and clears when supervise brings the driver back; both engines."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import App, drop_file, free_port, make_text, truth, wait_for_totals
from tests.integration.log_lines import RECOVERED, STARTED
from tests.integration.prometheus_server import SCRAPE_S, Prometheus
from tests.unit.test_alert_rules import as_grafana_sends, dashboard_exprs

pytestmark = pytest.mark.timeout(420)


# The endpoint serves both engines alike (test_prometheus_endpoint.py runs both in CI);
# the structured run under a real Prometheus is `slow`, to keep CI's time.
# `slow` since 2026-11-30, in the rotating shares (to keep CI within its time). In the
# `not slow` suite: a real server through a kill -9, test_prometheus_stop.py.
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_prometheus_scrapes_the_app_and_the_down_alert_fires_and_clears_under_supervise(
    dirs: dict[str, Path], tmp_path: Path, started: list[Any], engine: str
) -> None:
    rng = random.Random(40)
    texts: list[str] = []
    port = free_port()
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}")
    started.append(prometheus)  # stopped at the end even if it never comes up
    prometheus.wait_ready()
    # The first restart waits 40 s: longer than StreamingAppDown's `for: 30s`.
    run = [*files_args(dirs, "--engine", engine), "--metrics-port", str(port)]
    supervisor = App(["--backoff", "40", "--", *run], tmp_path, "supervise", command="supervise")
    started.append(supervisor)
    supervisor.wait_for_log(STARTED[engine])
    for n in range(2):
        texts.append(make_text(rng, 20 + n))
        drop_file(dirs["input"], f"f{n}.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), supervisor)
    lines = sum(len(t.splitlines()) for t in texts)
    prometheus.until(
        lambda: prometheus.value('streaming_app_records_total{job="streaming-app"}') == lines,
        f"Prometheus sees the {lines} lines read",
        60,
    )
    info = prometheus.api("query", query="streaming_app_info")["result"][0]["metric"]
    assert (info["engine"], info["source"], info["sinks"]) == (engine, "files", "files")
    # The app's job setting has a label of its own: Prometheus's `job` is the scrape job's.
    assert (info["app_job"], info["job"]) == ("wordcount", "streaming-app")
    assert prometheus.value('up{job="streaming-app"}') == 1
    assert not prometheus.firing("StreamingAppDown")
    # Every query of the Grafana dashboard is one this Prometheus accepts (400 otherwise).
    for expr in dashboard_exprs():
        query = as_grafana_sends(expr, job="streaming-app")
        assert prometheus.api("query", query=query)["result"] is not None, query
    # A rate needs two scrapes in its window: the batch counted above may be in the first.
    rate = 'rate(streaming_app_batches_total{job="streaming-app"}[1m])'
    prometheus.until(lambda: bool(prometheus.value(rate)), "batches per second above 0", 30)

    driver = int(supervisor.wait_for_log(r"started driver pid (\d+) \(start 1\)")[1])
    os.killpg(driver, signal.SIGKILL)
    killed = time.monotonic()
    prometheus.until(lambda: prometheus.firing("StreamingAppDown"), "StreamingAppDown", 90)
    fired_after = time.monotonic() - killed
    # Within two scrape intervals plus its `for:` (30 s), and some evaluation slack.
    assert fired_after <= 30 + 2 * SCRAPE_S + 5, fired_after
    supervisor.wait_for_log(r"started driver pid \d+ \(start 2\)", timeout=90)
    prometheus.until(lambda: not prometheus.firing("StreamingAppDown"), "the alert clears", 90)
    supervisor.wait_for_log(RECOVERED[engine])
    texts.append(make_text(rng, 15))
    drop_file(dirs["input"], "after.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), supervisor)
    # The restarted driver counts from zero: its records are the batches it ran itself.
    assert prometheus.value('changes(process_start_time_seconds{job="streaming-app"}[5m])') == 1
    assert supervisor.terminate() == 0, supervisor.log()[-3000:]
    print(f"{engine}: StreamingAppDown fired {fired_after:.1f} s after the kill")
