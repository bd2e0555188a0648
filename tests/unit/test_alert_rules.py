"""conf/prometheus and conf/grafana: the alert rules pass promtool's check and unit tests, and
the rules and the dashboard name only series the app's endpoint serves."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the test extra
from prometheus_client import generate_latest

from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.prometheus import Endpoint
from tests.binaries import require

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "conf" / "prometheus"
DASHBOARD = PROMETHEUS_DIR.parent / "grafana" / "streaming-app.json"
SERIES = re.compile(r"\b(?:streaming_app_[a-z_]+|process_[a-z_]+|up)\b(?![(:])")
# What a recording rule records (level:metric:operations), read by other rules.
RECORDED = re.compile(r"\b[a-z_]+:[a-z_]+(?::[a-z_]+)?\b")


def served_series() -> set[str]:
    """Every sample name the endpoint serves once a batch and a task completed (with
    _total, _bucket, ... as scraped), with snapshots on, and `up`."""
    served = Endpoint({"version": "v", "engine": "e", "app_job": "j", "source": "s", "sinks": "k"})
    served.observe(BatchMetrics(2000, 2000, 10, 5, 0, 5, None, 2100, words=9, state_keys=3), False)
    served.snapshot_interval.set(10)
    served.checkpoint_interval.set(20)
    served.tasks(((1, 0, 0),))
    served.tasks(((1, 0, 1),))  # a task completed: its time is served from then on
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


def dashboard() -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(DASHBOARD.read_text("utf-8")))


def dashboard_exprs() -> list[str]:
    """Every PromQL query of the Grafana dashboard: its panels' and its annotations'."""
    board = dashboard()
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]] + [
        annotation["expr"] for annotation in board["annotations"]["list"]
    ]


def as_grafana_sends(expr: str, job: str, instance: str = ".+") -> str:
    """A dashboard query as Grafana sends it, its variables replaced."""
    for name, value in (("$__rate_interval", "1m"), ("$job", job), ("$instance", instance)):
        expr = expr.replace(name, value)
    return expr


def promtool() -> str:
    """promtool's path (Debian's prometheus package brings it)."""
    return require("promtool", "Debian: apt-get install prometheus")


@pytest.mark.parametrize(
    "args",
    [
        ("check", "rules", "alerts.yml"),
        ("test", "rules", "alerts_test.yml"),
        ("test", "rules", "alerts_minute_test.yml"),
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
    recorded = {
        rule["record"] for group in rules["groups"] for rule in group["rules"] if "record" in rule
    }
    read = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in RECORDED.findall(rule["expr"])
    }
    assert read <= recorded, f"read but recorded by no rule: {sorted(read - recorded)}"


def test_every_series_the_dashboard_names_is_served() -> None:
    named = {series for expr in dashboard_exprs() for series in SERIES.findall(expr)}
    assert len(named) >= 10, named
    assert named <= served_series(), f"not served: {sorted(named - served_series())}"


def test_the_dashboard_serves_a_fleet() -> None:
    """Job and instance chosen from what the app serves; every query keeps to them, every
    rate fits Grafana's step, every legend names the instance, every panel has a unit."""
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["job"]["query"]["query"] == "label_values(streaming_app_info, job)"
    assert variables["instance"]["query"]["query"] == (
        'label_values(streaming_app_info{job="$job"}, instance)'
    )
    assert variables["instance"]["multi"] and variables["instance"]["includeAll"]
    for expr in dashboard_exprs():
        selectors = re.findall(r"\b[a-z_]+\{([^}]*)\}", expr)
        assert selectors, expr
        for selector in selectors:
            assert selector.startswith('job="$job", instance=~"$instance"'), expr
        windows = set(re.findall(r"\[([^\]]+)\]", expr))
        # Fixed windows only where the panel says so ("per 15 minutes"; starts in 15 m)
        # or the annotation marks each minute's starts.
        assert windows <= {"$__rate_interval", "15m", "1m"}, expr
        if "rate(" in expr:
            assert "[$__rate_interval]" in expr, expr
    for panel in board["panels"]:
        unit = panel["fieldConfig"]["defaults"]["unit"]
        assert unit not in ("", "short"), panel["title"]
        if "cores" in panel["title"]:  # a rate of CPU seconds: cores, not a percentage
            assert unit == "suffix: cores", (panel["title"], unit)
        for target in panel["targets"]:
            assert "{{instance}}" in target["legendFormat"], (panel["title"], target)
    starts = board["annotations"]["list"]
    assert [a["expr"] for a in starts if "process_start_time_seconds" in a["expr"]], starts


def test_the_start_annotation_marks_a_start_after_minutes_down(tmp_path: Path) -> None:
    """The dashboard's "driver started" annotation, as Grafana sends it, evaluated by
    promtool: a driver down for 5 minutes (its series stale) is marked when it starts
    again, and a driver that runs on is not marked again."""
    (start,) = [a["expr"] for a in dashboard()["annotations"]["list"]]
    expr = as_grafana_sends(start, "streaming-app", "d:9108")
    case = {
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        # Started at 0, killed at 10 m, started again at 15 m.
                        "series": 'process_start_time_seconds{job="streaming-app", '
                        'instance="d:9108"}',
                        "values": "0x9 stale _x4 900x20",
                    }
                ],
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": "15m",
                        "exp_samples": [
                            {
                                "labels": 'process_start_time_seconds{job="streaming-app", '
                                'instance="d:9108"}',
                                "value": 900,
                            }
                        ],
                    },
                    {"expr": expr, "eval_time": "25m", "exp_samples": []},
                ],
            }
        ],
    }
    (tmp_path / "annotation_test.yml").write_text(yaml.safe_dump(case), "utf-8")
    done = subprocess.run(
        [promtool(), "test", "rules", "annotation_test.yml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_has_a_runbook_section() -> None:
    """Each rule's runbook_url names a section of docs/runbook.md that exists."""
    runbook = (PROMETHEUS_DIR.parents[1] / "docs" / "runbook.md").read_text("utf-8")
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in runbook.splitlines()
        if line.startswith("## ")
    }
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text("utf-8"))
    for group in rules["groups"]:
        for rule in (r for r in group["rules"] if "alert" in r):  # not the recording rules
            url = rule["annotations"]["runbook_url"]
            base, anchor = url.split("#")
            assert base.endswith("docs/runbook.md"), url
            assert anchor == rule["alert"].lower() and anchor in headings, url
