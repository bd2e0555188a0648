"""A real Prometheus server (Debian's `prometheus`) scrapes the app under `supervise` with the
repository's alert rules: it finds the series with the app's values, and StreamingAppDown
fires after a kill -9 and clears when supervise brings the driver back."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming_app.tools.processes import stop_group
from tests.binaries import require
from tests.integration.conftest import files_args
from tests.integration.harness import App, drop_file, free_port, make_text, truth, wait_for_totals
from tests.unit.test_alert_rules import dashboard_exprs

pytestmark = pytest.mark.timeout(420)

RULES = Path(__file__).resolve().parents[2] / "conf" / "prometheus" / "alerts.yml"
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
SCRAPE_S = 1  # the test's scrape and evaluation interval


class Prometheus:
    """A Prometheus server on 127.0.0.1 scraping one target, with the repository's rules."""

    def __init__(self, workdir: Path, target: str) -> None:
        binary = require("prometheus", "Debian: apt-get install prometheus")
        workdir.mkdir()
        config = workdir / "prometheus.yml"
        config.write_text(
            f"global: {{scrape_interval: {SCRAPE_S}s, evaluation_interval: {SCRAPE_S}s}}\n"
            f"rule_files: [{json.dumps(str(RULES))}]\n"
            "scrape_configs:\n"
            "  - job_name: streaming-app\n"
            f"    static_configs: [{{targets: [{json.dumps(target)}]}}]\n"
        )
        self.port = free_port()
        self.log = open(workdir / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [
                binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip

    def wait_ready(self) -> None:
        """Return once the server answers its API."""
        self.until(lambda: self.api("status/runtimeinfo") is not None, "Prometheus up", 60)

    def api(self, path: str, **params: str) -> Any:
        """The `data` of an API call, None if the server does not answer yet."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}{query}"
        try:
            with _LOOPBACK.open(url, timeout=5) as response:
                return json.load(response)["data"]
        except OSError:
            return None

    def value(self, expr: str) -> float | None:
        """The one value of an instant query, None if it has none."""
        data = self.api("query", query=expr) or {}
        result = data.get("result") or []
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def firing(self, name: str) -> bool:
        """Whether alert `name` fires now."""
        alerts = (self.api("alerts") or {}).get("alerts") or []
        return any(a["labels"]["alertname"] == name and a["state"] == "firing" for a in alerts)

    def until(self, check: Callable[[], bool], what: str, timeout: float) -> float:
        """Poll `check` until it holds; the seconds it took."""
        started = time.monotonic()
        while not check():
            assert self.proc.poll() is None, f"Prometheus exited; its log: {self.log.name}"
            assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
            time.sleep(0.2)
        return time.monotonic() - started

    def stop(self) -> None:
        stop_group(self.proc, grace=10)
        self.log.close()


@pytest.fixture
def started() -> Iterator[list[Any]]:
    """What the test started, stopped at its end."""
    things: list[Any] = []
    yield things
    for thing in reversed(things):
        thing.stop() if isinstance(thing, Prometheus) else thing.stop_if_running()


def test_prometheus_scrapes_the_app_and_the_down_alert_fires_and_clears_under_supervise(
    dirs: dict[str, Path], tmp_path: Path, started: list[Any]
) -> None:
    rng = random.Random(40)
    texts: list[str] = []
    port = free_port()
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}")
    started.append(prometheus)  # stopped at the end even if it never comes up
    prometheus.wait_ready()
    # The first restart waits 40 s: longer than StreamingAppDown's `for: 30s`.
    run = [*files_args(dirs), "--metrics-port", str(port)]
    supervisor = App(["--backoff", "40", "--", *run], tmp_path, "supervise", command="supervise")
    started.append(supervisor)
    supervisor.wait_for_log(r"Started new streaming context")
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
    assert (info["engine"], info["source"], info["sinks"]) == ("dstream", "files", "files")
    assert prometheus.value('up{job="streaming-app"}') == 1
    assert not prometheus.firing("StreamingAppDown")
    # Every query of the Grafana dashboard is one this Prometheus accepts (400 otherwise).
    for expr in dashboard_exprs():
        assert prometheus.api("query", query=expr.replace("$job", "streaming-app")) is not None, (
            expr
        )
    assert prometheus.value('rate(streaming_app_batches_total{job="streaming-app"}[1m])')

    driver = int(supervisor.wait_for_log(r"started driver pid (\d+) \(start 1\)")[1])
    os.killpg(driver, signal.SIGKILL)
    killed = time.monotonic()
    prometheus.until(lambda: prometheus.firing("StreamingAppDown"), "StreamingAppDown", 90)
    fired_after = time.monotonic() - killed
    # Within two scrape intervals plus its `for:` (30 s), and some evaluation slack.
    assert fired_after <= 30 + 2 * SCRAPE_S + 5, fired_after
    supervisor.wait_for_log(r"started driver pid \d+ \(start 2\)", timeout=90)
    prometheus.until(lambda: not prometheus.firing("StreamingAppDown"), "the alert clears", 90)
    supervisor.wait_for_log(r"Recovered streaming context from checkpoint")
    texts.append(make_text(rng, 15))
    drop_file(dirs["input"], "after.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), supervisor)
    # The restarted driver counts from zero: its records are the batches it ran itself.
    assert prometheus.value('changes(process_start_time_seconds{job="streaming-app"}[5m])') == 1
    assert supervisor.terminate() == 0, supervisor.log()[-3000:]
    print(f"StreamingAppDown fired {fired_after:.1f} s after the kill")
