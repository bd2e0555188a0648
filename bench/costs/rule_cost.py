"""The cost of the alert rules to a fleet's Prometheus: each rule group's evaluation time
with 1,000 simulated targets and a day of their history, the rules of a git revision
against this checkout's.

    python bench/run.py rule-cost [--targets 1000] [--before ba2e827] [--minutes 3]

One Python HTTP server plays every target: Prometheus scrapes it once per target, told
apart by a scrape parameter (`__param_n`) and an `instance` label of its own, and it
answers each with what the app's endpoint serves after a batch (common/prometheus.py's
registry, its process series given a start time of the target's own). Before the server
starts, `promtool tsdb create-blocks-from openmetrics` writes a day of the series the rules
read over long ranges (`streaming_app_info`, `streaming_app_stopping`, and the memory
group's two recorded series), one sample a minute (Prometheus' default scrape interval),
so that a range of a day reads what it would in production. Each side then runs on its own
copy of that store: scraping every 60 s, evaluating every 5 s (conf/prometheus/
prometheus.yml's), for `--minutes`; Prometheus' own `prometheus_rule_group_last_duration_
seconds` is read for each group after every evaluation, and the report gives the median
and the largest per group, and Prometheus' CPU seconds over the run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.harness.results import make_workdir, median

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "conf" / "prometheus" / "alerts.yml"
JOB = "streaming-app"
SCRAPE_S = 60
EVALUATE_S = 5
HISTORY_S = 24 * 3600
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
INFO = {"version": "0.5.2", "engine": "dstream", "app_job": "wordcount", "source": "files",
        "sinks": "files"}  # fmt: skip


def app_body() -> str:
    """What the app's endpoint serves after one batch (without its process series)."""
    from prometheus_client import generate_latest

    from streaming_app.common.metrics_record import BatchMetrics
    from streaming_app.common.prometheus import Endpoint

    endpoint = Endpoint(INFO)
    now_ms = int(time.time() * 1000)
    batch = BatchMetrics(
        batch_time_ms=now_ms, batch_interval_ms=2000, records=100, processing_ms=400,
        scheduling_delay_ms=3, total_delay_ms=403, kafka_lag=None, completed_ms=now_ms + 450,
    )  # fmt: skip
    endpoint.observe(batch, False)
    text = generate_latest(endpoint.registry).decode()
    return "".join(
        line + "\n" for line in text.splitlines() if "process_start_time_seconds" not in line
    )


class Targets(ThreadingHTTPServer):
    """Every simulated target: GET /metrics?n=N answers the app's series, target N's start."""

    daemon_threads = True

    def __init__(self, started: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.body = app_body()
        self.started = started
        self.scrapes = 0


class _Handler(BaseHTTPRequestHandler):
    server: Targets

    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        n = int(query.get("n", ["0"])[0])
        body = (
            self.server.body
            + "# TYPE process_start_time_seconds gauge\n"
            + f"process_start_time_seconds {self.server.started - n:.1f}\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.scrapes += 1

    def log_message(self, *args: Any) -> None:
        pass


def history(path: Path, targets: int, end: float) -> None:
    """A day of the long-range series of every target, one sample a minute, as OpenMetrics."""
    labels = ",".join(f'{k}="{v}"' for k, v in INFO.items())
    with open(path, "w") as out:
        for name, kind in (
            ("streaming_app_info", "gauge"),
            ("streaming_app_stopping", "gauge"),
            ("streaming_app_instance:seen_timestamp_seconds", "gauge"),
            ("streaming_app_instance:stopping", "gauge"),
        ):
            out.write(f"# TYPE {name} {kind}\n")
            for n in range(targets):
                series = f'job="{JOB}",instance="sim-{n}:9108"'
                if name == "streaming_app_info":
                    series += "," + labels
                for at in range(int(end) - HISTORY_S, int(end), SCRAPE_S):
                    value = at if name.endswith("seconds") else int(name.endswith("info"))
                    out.write(f"{name}{{{series}}} {value} {at}\n")
        out.write("# EOF\n")


def config(path: Path, rules: Path, port: int, targets: int) -> None:
    """A Prometheus configuration that scrapes every simulated target and loads `rules`."""
    static = [
        {
            "targets": [f"127.0.0.1:{port}"],
            "labels": {"instance": f"sim-{n}:9108", "__param_n": str(n)},
        }
        for n in range(targets)
    ]
    path.write_text(
        json.dumps(
            {
                "global": {
                    "scrape_interval": f"{SCRAPE_S}s",
                    "evaluation_interval": f"{EVALUATE_S}s",
                },
                "rule_files": [str(rules)],
                "scrape_configs": [{"job_name": JOB, "static_configs": static}],
            }
        )
    )


def api(port: int, path: str, **params: str) -> Any:
    """The `data` of a call of the server's API, None while it does not answer."""
    url = f"http://127.0.0.1:{port}/api/v1/{path}?" + urllib.parse.urlencode(params)
    try:
        with _DIRECT.open(url, timeout=30) as response:
            return json.loads(response.read())["data"]
    except OSError:
        return None


def query(port: int, expr: str) -> list[dict[str, Any]]:
    """The result of an instant query, [] while the server does not answer."""
    return list((api(port, "query", query=expr) or {}).get("result", []))


@contextmanager
def prometheus(
    workdir: Path, rules: Path, data: Path, target_port: int, targets: int
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A Prometheus server on a copy of `data`, with `rules`; its port and process."""
    from streaming_app.tools.dev_broker import free_port
    from streaming_app.tools.processes import stop_group

    port = free_port()
    conf = workdir / "prometheus.yml"
    config(conf, rules, target_port, targets)
    store = workdir / "data"
    shutil.copytree(data, store)
    with open(workdir / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            ["prometheus", f"--config.file={conf}", f"--storage.tsdb.path={store}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            yield port, proc
        finally:
            stop_group(proc, grace=30)


def own_metrics(port: int) -> dict[str, dict[str, float]]:
    """Prometheus' own series (it does not scrape itself here): name -> rule group -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with _DIRECT.open(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[sample.labels.get("rule_group", "")] = sample.value
    return found


def scraped(port: int) -> float:
    """How many targets the server scraped successfully last time (0 before it answers)."""
    result = query(port, f'count(up{{job="{JOB}"}} == 1)')
    return float(result[0]["value"][1]) if result else 0.0


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks


def measure(workdir: Path, rules: Path, data: Path, targets: int, minutes: float) -> dict[str, Any]:
    """One side: each group's evaluation times over `minutes`, and Prometheus' CPU."""
    server = Targets(time.time())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with prometheus(workdir, rules, data, server.server_address[1], targets) as (port, proc):
            deadline = time.monotonic() + 300
            while scraped(port) < targets:
                assert proc.poll() is None, f"Prometheus exited: {workdir / 'prometheus.log'}"
                assert time.monotonic() < deadline, "the targets were not all scraped in 5 minutes"
                time.sleep(2)
            cpu_before, started = cpu_seconds(proc.pid), time.monotonic()
            seen: dict[str, dict[float, float]] = {}  # group -> evaluation time -> seconds
            rules_seen: dict[str, dict[str, float]] = {}  # rule -> its evaluation -> seconds
            while time.monotonic() - started < minutes * 60:
                for group in (api(port, "rules") or {}).get("groups", []):
                    for rule in group["rules"]:
                        times = rules_seen.setdefault(f"{group['name']}: {rule['name']}", {})
                        times[rule["lastEvaluation"]] = float(rule["evaluationTime"])
                own = own_metrics(port)
                for name, seconds in own.get(
                    "prometheus_rule_group_last_duration_seconds", {}
                ).items():
                    at = own["prometheus_rule_group_last_evaluation_timestamp_seconds"][name]
                    seen.setdefault(name.rsplit(";", 1)[1], {})[at] = seconds
                time.sleep(EVALUATE_S / 2)
            cpu = cpu_seconds(proc.pid) - cpu_before
            series = own_metrics(port)["prometheus_tsdb_head_series"][""]
    finally:
        server.shutdown()
    return {
        "groups": {
            group: {
                "evaluations": len(times),
                "median_s": median(list(times.values())),
                "max_s": max(times.values()),
            }
            for group, times in sorted(seen.items())
        },
        "rules": {rule: median(list(t.values())) for rule, t in sorted(rules_seen.items())},
        "cpu_s_per_minute": cpu / minutes,
        "head_series": series,
        "scrapes": server.scrapes,
    }


def report(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The markdown tables: each group's evaluation time per side (the median of its rounds'
    medians, the largest of all), Prometheus' CPU, and each rule's median time."""
    lines = [
        "| rules | group | evaluations | median | largest | Prometheus CPU s/min |",
        "|---|---|---|---|---|---|",
    ]
    for side, rounds in found.items():
        cpu = median([r["cpu_s_per_minute"] for r in rounds])
        for group in rounds[0]["groups"]:
            runs = [r["groups"][group] for r in rounds if group in r["groups"]]
            evaluations = sum(g["evaluations"] for g in runs)
            middle = median([g["median_s"] for g in runs]) * 1000
            largest = max(g["max_s"] for g in runs) * 1000
            lines.append(
                f"| {side} | `{group}` | {evaluations} | {middle:.0f} ms | {largest:.0f} ms "
                f"| {cpu:.1f} |"
            )
    lines += ["", "| rules | rule | median evaluation |", "|---|---|---|"]
    for side, rounds in found.items():
        for rule in rounds[0]["rules"]:
            middle = median([r["rules"][rule] for r in rounds if rule in r["rules"]]) * 1000
            lines.append(f"| {side} | {rule} | {middle:.1f} ms |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--before", default="ba2e827", help="the git revision of the rules before")
    parser.add_argument("--minutes", type=float, default=3.0, help="each side's measured run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side, alternated")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--history", type=Path, default=None, help="a store a run made before (its history-data)"
    )
    options = parser.parse_args()
    workdir = make_workdir(options.workdir, "streaming-app-rule-cost-")
    before = workdir / "alerts-before.yml"
    shown = f"{options.before}:conf/prometheus/alerts.yml"
    before.write_text(
        subprocess.run(
            ["git", "-C", str(ROOT), "show", shown], check=True, capture_output=True, text=True
        ).stdout
    )
    after = workdir / "alerts-after.yml"
    shutil.copy(RULES, after)
    data = options.history or workdir / "history-data"
    if options.history is None:
        history(workdir / "history.om", options.targets, time.time() - 5 * 60)
        backfill = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet"]
        subprocess.run([*backfill, str(workdir / "history.om"), str(data)], check=True)
        (workdir / "history.om").unlink()
    sides = {f"before ({options.before})": before, "after (this checkout)": after}
    found: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for number in range(options.rounds):
        order = list(sides) if number % 2 == 0 else list(reversed(sides))  # drift hits both
        for side in order:
            side_dir = workdir / f"{side.split()[0]}-{number}"
            side_dir.mkdir()
            figures = measure(side_dir, sides[side], data, options.targets, options.minutes)
            found[side].append(figures)
            print(f"{side}: {json.dumps(figures)}", file=sys.stderr)
    (workdir / "rule-cost.json").write_text(json.dumps(found, indent=2))
    print("\n".join(report(found)))
    series = found[next(iter(found))][0]["head_series"]
    print(f"\n({options.targets} targets, {series:.0f} head series; in {workdir})", file=sys.stderr)
