"""conf/prometheus: the alert rules pass promtool's check and unit tests, and name only series
the app's endpoint serves."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the test extra
from prometheus_client import generate_latest

from streaming_app.common.prometheus import Endpoint

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "conf" / "prometheus"
SERIES = re.compile(r"\b(?:streaming_app_[a-z_]+|process_[a-z_]+)\b")


def promtool() -> str:
    """promtool's path; skipped where it is missing, failed in CI (.ci/run installs it)."""
    found = shutil.which("promtool")
    if found is None:
        reason = "promtool is not installed (Debian: apt-get install prometheus)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


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
    served = Endpoint({"version": "v", "engine": "e", "job": "j", "source": "s", "sinks": "k"})
    text = generate_latest(served.registry).decode()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    names |= {f"{name}_total" for name in names} | {"up"}
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text("utf-8"))
    named = {
        series
        for group in rules["groups"]
        for rule in group["rules"]
        for series in SERIES.findall(rule["expr"])
    }
    assert named, "no series found in the rules"
    assert named <= names, f"not served: {sorted(named - names)}"
