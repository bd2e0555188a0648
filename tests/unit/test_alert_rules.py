"""conf/prometheus and conf/grafana: the alert rules pass promtool's check and unit tests, and
the rules and the dashboard name only series the app's endpoint serves."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the test extra
from prometheus_client import generate_latest

from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.prometheus import Endpoint
from tests.binaries import require

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "conf" / "prometheus"
DASHBOARD = PROMETHEUS_DIR.parent / "grafana" / "streaming-app.json"
SERIES = re.compile(r"\b(?:streaming_app_[a-z_]+|process_[a-z_]+|up)\b(?!\()")


def served_series() -> set[str]:
    """Every sample name the endpoint serves once a batch completed (with _total, _bucket,
    ... as scraped), with snapshots on, and `up`."""
    served = Endpoint({"version": "v", "engine": "e", "job": "j", "source": "s", "sinks": "k"})
    served.observe(BatchMetrics(2000, 2000, 10, 5, 0, 5, None, 2100, words=9, state_keys=3), False)
    served.snapshot_interval.set(10)
    text = generate_latest(served.registry).decode()
    names = {re.split(r"[{ ]", line)[0] for line in text.splitlines() if line[:1] != "#"}
    # Labelled series have no sample before their first batch: their TYPE line names them
    # (and a histogram's samples are its _bucket, _sum and _count).
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            suffixes = ("_bucket", "_sum", "_count") if kind == "histogram" else ("",)
            names |= {name + suffix for suffix in suffixes}
    return names | {"up"}


def dashboard_exprs() -> list[str]:
    """Every query of the Grafana dashboard."""
    panels = json.loads(DASHBOARD.read_text("utf-8"))["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def promtool() -> str:
    """promtool's path (Debian's prometheus package brings it)."""
    return require("promtool", "Debian: apt-get install prometheus")


@pytest.mark.parametrize(
    "args",
    [
        ("check", "rules", "alerts.yml"),
        ("test", "rules", "alerts_test.yml"),
        ("check", "config", "prometheus.yml"),
    ],
)
def test_promtool_passes(args: tuple[str, ...]) -> None:
    done = subprocess.run(
        [promtool(), *args], cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_series_the_rules_name_is_served() -> None:
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text("utf-8"))
    named = {
        series
        for group in rules["groups"]
        for rule in group["rules"]
        for series in SERIES.findall(rule["expr"])
    }
    assert named, "no series found in the rules"
    assert named <= served_series(), f"not served: {sorted(named - served_series())}"


def test_every_series_the_dashboard_names_is_served() -> None:
    named = {series for expr in dashboard_exprs() for series in SERIES.findall(expr)}
    assert len(named) >= 10, named
    assert named <= served_series(), f"not served: {sorted(named - served_series())}"
