"""Spark settings given at a restart apply to the recovered context (and are named).

Spark alone rebuilds a recovered DStream context's SparkConf from the checkpoint, so a
metrics sink or a UI turned on at a restart would be ignored without a word.
"""

from __future__ import annotations

import random
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, free_port, make_text, truth, wait_for_totals

pytestmark = pytest.mark.timeout(300)

PROMETHEUS = "spark.metrics.conf.*.sink.prometheusServlet"


def test_a_metrics_sink_and_the_ui_turned_on_at_a_restart_apply_after_recovery(
    dirs: dict[str, Path], start_app: Any
) -> None:
    rng = random.Random(3)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, 20))
        drop_file(dirs["input"], name, texts[-1].encode())

    # Two-second batches: the restart replays its down time batch by batch, and on two
    # busy cores one-second batches with the UI serving would barely catch up.
    slower = ("--batch-interval", "2", "--checkpoint-interval", "4", "--snapshot-interval", "10")
    app = start_app(*files_args(dirs, *slower))  # the UI off (common_args), no metrics sink
    app.wait_for_log(r"Started new streaming context")
    add("a.txt")
    wait_for_totals(dirs["output"], truth(texts), app)
    assert app.terminate() == 0, app.log()[-3000:]

    port = free_port()
    app = start_app(
        *files_args(dirs, *slower),
        "--spark-conf", "spark.ui.enabled=true",
        "--spark-conf", f"spark.ui.port={port}",
        "--spark-conf", f"{PROMETHEUS}.class=org.apache.spark.metrics.sink.PrometheusServlet",
        "--spark-conf", f"{PROMETHEUS}.path=/metrics/prometheus",
        # Series named without the application id, which changes at each restart.
        "--spark-conf", "spark.metrics.namespace=streaming_app",
    )  # fmt: skip
    app.wait_for_log(r"Recovered streaming context from checkpoint .* at batch_time_ms=\d+")
    named = app.wait_for_log(r"Spark settings that differ from the checkpoint's, [^:]*: (.*)")
    assert {f"{PROMETHEUS}.class", "spark.metrics.namespace", "spark.ui.enabled"} <= {
        key.strip() for key in named.group(1).split(",")
    }, named.group(0)
    assert re.search(rf"Spark UI at http://\S+:{port}\b", app.log()), app.log()[-3000:]
    add("b.txt")
    wait_for_totals(dirs["output"], truth(texts), app, timeout=180)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics/prometheus", timeout=10) as response:
        body = response.read().decode()
    names = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line[:1] != "#"}
    assert any(n.startswith("metrics_streaming_app_driver_") for n in names), body[:2000]
    assert not [n for n in names if re.search(r"_(app|local)_?\d", n)], body[:2000]
    assert app.terminate() == 0, app.log()[-3000:]
    assert "Creating new context" not in app.log()
