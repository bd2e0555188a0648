"""A real Prometheus server (Debian's `prometheus`) for the tests, scraping one target.

On 127.0.0.1 of this machine, or on a host of a network-namespace fixture (`netns.Host`),
bound to that host's address and started there with `ip netns exec`, as a Prometheus on
another machine would be. Its HTTP API is read from where it listens: directly on
loopback, by a short Python process on the host otherwise (the root namespace has no route
to the hosts). `stop` ends it by its PID's group; a host's network kills it too at close.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streaming_app.tools.processes import stop_group
from tests.binaries import require
from tests.integration.harness import free_port, wait_for
from tests.integration.netns import Host

RULES = Path(__file__).resolve().parents[2] / "conf" / "prometheus" / "alerts.yml"
JOB = "streaming-app"  # the scrape job's name, as conf/prometheus/prometheus.yml has it
SCRAPE_S = 1  # the tests' scrape and evaluation interval
PORT_ON_HOST = 9090  # Prometheus' own default: a host's namespace has only the test's ports
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Run on a host: GET argv[1] (no proxy), the body on stdout; exit 1 on any error.
_GET = """
import sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(sys.argv[1], timeout=5) as response:
        sys.stdout.buffer.write(response.read())
except OSError as exc:
    sys.exit(f"{type(exc).__name__}: {exc}")
"""


class Prometheus:
    """A Prometheus server scraping `target` (HOST:PORT) as job `JOB` every `scrape_s`
    seconds (and evaluating its rules as often); with `rules`, the repository's alert
    rules. On `host` if given, else on 127.0.0.1."""

    def __init__(
        self,
        workdir: Path,
        target: str,
        rules: Path | None = RULES,
        host: Host | None = None,
        scrape_s: float = SCRAPE_S,
        evaluate_s: float | None = None,
        replica: str | None = None,
    ) -> None:
        """`replica`: one server of an HA pair, as operators run them: its own external
        label (which also moves its scrapes' offset) and a scrape parameter of its own
        (which tells it apart from its twin at the app: docs/metrics.md)."""
        binary = require("prometheus", "Debian: apt-get install prometheus")
        workdir.mkdir()
        config = workdir / "prometheus.yml"
        rule_files = f"rule_files: [{json.dumps(str(rules))}]\n" if rules else ""
        labels = f", external_labels: {{replica: {replica}}}" if replica else ""
        params = f"    params: {{replica: [{replica}]}}\n" if replica else ""
        config.write_text(
            f"global: {{scrape_interval: {scrape_s:g}s, "
            f"evaluation_interval: {evaluate_s or scrape_s:g}s"
            f"{labels}}}\n"
            f"{rule_files}"
            "scrape_configs:\n"
            f"  - job_name: {JOB}\n"
            f"{params}"
            f"    static_configs: [{{targets: [{json.dumps(target)}]}}]\n"
        )
        self.host = host
        self.address = host.address if host is not None else "127.0.0.1"
        self.port = PORT_ON_HOST if host is not None else free_port()
        command = [
            binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={self.address}:{self.port}",
        ]  # fmt: skip
        self.log = open(workdir / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
        options: dict[str, Any] = {
            "stdout": self.log, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL,
        }  # fmt: skip
        if host is not None:  # `ip netns exec` execs: the PID is Prometheus'
            self.proc = host.popen(command, **options)
        else:
            self.proc = subprocess.Popen(command, start_new_session=True, **options)

    def get(self, path: str) -> str | None:
        """The body of GET `path` on the server, None if it does not answer (or not 200)."""
        url = f"http://{self.address}:{self.port}{path}"
        if self.host is None:
            try:
                with _LOOPBACK.open(url, timeout=5) as response:
                    return str(response.read().decode())
            except OSError:
                return None
        done = self.host.run([sys.executable, "-c", _GET, url], timeout=30)
        return done.stdout if done.returncode == 0 else None

    def wait_ready(self) -> None:
        """Return once the server answers its API."""
        self.until(lambda: self.api("status/runtimeinfo") is not None, "Prometheus up", 60)

    def api(self, path: str, **params: str) -> Any:
        """The `data` of an API call, None if the server does not answer yet."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        body = self.get(f"/api/v1/{path}{query}")
        return None if body is None else json.loads(body)["data"]

    def value(self, expr: str) -> float | None:
        """The one value of an instant query, None if it has none."""
        data = self.api("query", query=expr) or {}
        result = data.get("result") or []
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def firing(self, name: str) -> bool:
        """Whether alert `name` fires now."""
        alerts = (self.api("alerts") or {}).get("alerts") or []
        return any(a["labels"]["alertname"] == name and a["state"] == "firing" for a in alerts)

    def alerts(self) -> list[str]:
        """Every alert pending or firing now, as `NAME state`."""
        alerts = (self.api("alerts") or {}).get("alerts") or []
        return [f"{a['labels']['alertname']} {a['state']}" for a in alerts]

    def until(self, check: Callable[[], bool], what: str, timeout: float) -> float:
        """Poll `check` until it holds; the seconds it took."""
        started = time.monotonic()
        wait_for(
            what, check, timeout, proc=self.proc, detail=lambda: f"Prometheus' log: {self.log.name}"
        )
        return time.monotonic() - started

    def stop(self) -> None:
        """SIGTERM its group, SIGKILL after 10 s; close its log."""
        stop_group(self.proc, grace=10)
        self.log.close()
