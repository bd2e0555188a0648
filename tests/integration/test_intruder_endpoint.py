"""The driver's Prometheus endpoint at its default address refuses another host (issue 40,
item 6).

Two hosts of their own on a test network: the driver's serves the app's endpoint with
every setting at its default but the port, so it listens on 127.0.0.1 of that host; the
intruder's host (a user's shell with PySpark and no secret) is refused, as is the driver's
own network address, while loopback on the driver's host serves. (Given `--metrics-host`,
the endpoint is scraped from another host: test_intruder.py.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streaming_app.tools.processes import stop_group
from tests.integration.cluster_helpers import ROOT
from tests.integration.intruder_tools import Intruder, intruder_env
from tests.integration.netns import Network

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

PORT = 9110

# Run on a host: the app's endpoint as `run` starts it (lifecycle.serving_metrics), every
# setting at its default but metrics_port (argv[1]); serves until stopped.
_DEFAULT_ENDPOINT = """
import sys, time
from streaming_app.lifecycle.serving_metrics import serving_metrics
from streaming_app.settings.loading import load_config
config = load_config(env={}, cli={"metrics_port": sys.argv[1]})
with serving_metrics(config):
    print(f"serving on {config.metrics_host}", flush=True)
    time.sleep(300)
"""


def test_the_endpoint_on_its_default_address_refuses_another_host(
    network: Network, tmp_path: Path
) -> None:
    """metrics_host unset: 127.0.0.1 of the driver's host, so the intruder's host is refused
    (as is the driver's own network address), while loopback on the driver's host serves."""
    driver, intruder, port = network.add_host("driver"), network.add_host("intruder"), PORT
    out = tmp_path / "endpoint.out"
    with open(out, "wb") as handle:
        proc = driver.popen(
            [sys.executable, "-c", _DEFAULT_ENDPOINT, str(port)],
            stdout=handle, stderr=subprocess.STDOUT, env=intruder_env(tmp_path), cwd=ROOT,
        )  # fmt: skip
    try:
        driver.wait_for_port("127.0.0.1", port)
        local = Intruder(driver, tmp_path).now(
            "http", "GET", f"http://127.0.0.1:{port}/metrics", "--save", str(tmp_path / "m.txt")
        )
        own_address = Intruder(driver, tmp_path).now("connect", driver.address, str(port))
        other_host = Intruder(intruder, tmp_path).now("connect", driver.address, str(port))
    finally:
        stop_group(proc, grace=10)
    assert out.read_text().strip() == "serving on 127.0.0.1", out.read_text()
    assert local["status"] == 200, local
    assert "streaming_app_batches_total 0.0" in (tmp_path / "m.txt").read_text()
    assert own_address == {"connect": "refused"}, own_address
    assert other_host == {"connect": "refused"}, other_host
