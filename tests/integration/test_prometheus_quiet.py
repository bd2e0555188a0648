"""A healthy app pages nothing over its life, with the shipped rules as they are and a real
Prometheus (Debian's `prometheus`), both engines: idle for over 5 minutes from its start,
input, idle again, a graceful stop, down for longer than StreamingAppDown's `for:`, a start
that recovers, input again. Every second the test reads the server's alerts: none may be
pending or firing at any time.

About 10 minutes an engine, so `slow`:
`scripts/test.sh -m slow -n 0 tests/integration/test_prometheus_quiet.py`."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, free_port, make_text, truth, wait_for_totals
from tests.integration.log_lines import RECOVERED, STARTED
from tests.integration.prometheus_server import Prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

IDLE_S = 330  # over 5 minutes without input, from the start
DOWN_S = 45  # stopped for longer than StreamingAppDown's `for: 30s`


class AlertWatch:
    """Reads the server's alerts every second in a thread; remembers every one it saw."""

    def __init__(self, prometheus: Prometheus) -> None:
        self.prometheus = prometheus
        self.seen: list[tuple[float, str, str]] = []
        self.reads = 0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1):
            alerts = self.prometheus.api("alerts")
            if alerts is None:
                continue
            self.reads += 1
            at = time.monotonic() - self._started
            for alert in alerts["alerts"]:
                self.seen.append((round(at), alert["labels"]["alertname"], alert["state"]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_a_healthy_app_pages_nothing_idle_input_idle_stop_and_start(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path, engine: str
) -> None:
    rng = random.Random(44)
    port = free_port()  # the same target before and after the restart
    args = [*files_args(dirs, "--engine", engine), "--metrics-port", str(port)]
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}")  # the shipped rules
    watch = None
    try:
        prometheus.wait_ready()
        watch = AlertWatch(prometheus)
        app = start_app(*args)
        app.wait_for_log(STARTED[engine])
        ready = 'streaming_app_ready{job="streaming-app"}'
        prometheus.until(lambda: prometheus.value(ready) == 1, "ready", 180)
        time.sleep(IDLE_S)
        texts = [make_text(rng, 20)]
        drop_file(dirs["input"], "a.txt", texts[-1].encode())
        wait_for_totals(dirs["output"], truth(texts), app, timeout=120)
        time.sleep(60)
        assert app.terminate() == 0, app.log()[-3000:]
        prometheus.until(lambda: prometheus.value('up{job="streaming-app"}') == 0, "down", 30)
        time.sleep(DOWN_S)

        app = start_app(*args)
        app.wait_for_log(RECOVERED[engine])
        prometheus.until(lambda: prometheus.value(ready) == 1, "ready again", 180)
        time.sleep(90)
        texts.append(make_text(rng, 20))
        drop_file(dirs["input"], "b.txt", texts[-1].encode())
        wait_for_totals(dirs["output"], truth(texts), app, timeout=120)
        time.sleep(30)
        watch.stop()
        assert watch.seen == [], watch.seen
        # It read the alerts all along: about once a second over the whole run.
        assert watch.reads >= IDLE_S + 60 + DOWN_S + 90, watch.reads
        assert app.terminate() == 0, app.log()[-3000:]
    finally:
        if watch is not None:
            watch.stop()
        prometheus.stop()
