"""An intruder on the network of a secured cluster (issue 39, item 5): it gets nothing.

Four hosts of their own: a standalone master and one worker started with a copy of
`conf/secure` (SPARK_CONF_DIR; the REST submission server's setting comes from there alone),
the driver running the app with `scripts/submit.sh`, `conf/secure` and the secret file, and
an intruder with no secret. While the app counts exactly, on either engine, the intruder
tries: an application on the master with no secret and with a wrong one; a driver through
the REST submission server (port 6066) and through the master's RPC port (`spark-submit
--deploy-mode cluster`); a page of the master's, the worker's and the driver's web UIs
(issue 57, item 5: conf/secure/spark-env.sh keeps them on loopback), whose positive control
is the same request on each host's own loopback, where an operator's SSH tunnel or proxy
arrives; from there, the master UI's kill and the driver UI's job and stage kill links;
the driver's RPC file server, which Spark does not protect, for every file the
driver's UI lists and the code zip that `submit.sh` ships on an unsecured cluster (a
secured one's workers import the app installed in their Python: the driver serves
nothing), and, the same probe's positive control, a file that a file server on the
driver's host does serve; the driver UI's environment. A capture of the bridge throughout holds
no input word (long random tokens) and no secret; no process's command line holds the
secret, nor does any file the run leaves.

The driver's Prometheus endpoint listens on the driver's address (issue 40, item 6): a real
Prometheus on the intruder's host scrapes it (metrics are not secret; a host without the
secret may read them), and neither the text it scraped nor the labels and values it stored
hold the secret or the passwords the driver was given (left at its default address, the
endpoint refuses another host: test_intruder_endpoint.py). The capture, the command-line
watch and the intruder's shell are intruder_tools.py's.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster_helpers import ROOT, SPARK_HOME, SubmittedApp
from tests.integration.cluster_hosts import (
    MASTER_PORT,
    MASTER_UI_PORT,
    WORKER_UI_PORT,
    HostCluster,
)
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, truth, wait_for_totals
from tests.integration.intruder import parse_kill_forms
from tests.integration.intruder_tools import Capture, CommandLines, Intruder, tcp_payload_by_port
from tests.integration.log_lines import STARTED
from tests.integration.netns import Host, Network, pick_subnet, root_networks, worker_number
from tests.integration.pg_helpers import ci
from tests.integration.prometheus_server import JOB, Prometheus
from tests.integration.test_cluster_partition import pids_on
from tests.secrets_scan import find_secrets

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(480)]  # 2-3 minutes when not loaded

REST_PORT = 6066  # the master's REST submission server, were it on
DRIVER_PORT = {"dstream": 7101, "structured": 7102}  # the driver's RPC (and file) server
CONTROL_PORT = 7109  # a file server that serves a file, on the driver's host
UI_PORT = {"dstream": 4041, "structured": 4042}
METRICS_PORT = {"dstream": 9108, "structured": 9109}  # the driver's /metrics
WORDS = 16


@dataclass
class Site:
    """The network, its hosts, the secured cluster, and the secret its daemons were given."""

    network: Network
    hosts: dict[str, Host]
    cluster: HostCluster
    secret: str
    secret_file: Path


@pytest.fixture(scope="module")
def site(
    _netns_ready: None, worker_id: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """Master, worker, driver and intruder hosts; the cluster on conf/secure with the secret."""
    if shutil.which("tcpdump") is None:  # .ci/run installs it
        reason = "the intruder test captures the network with tcpdump, which is not installed"
        if ci():
            pytest.fail(reason)
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("intruder-site")
    secret = secrets.token_hex(32)
    secret_file = workdir / "spark-secret"
    secret_file.write_text(secret + "\n")
    secret_file.chmod(0o600)
    # The daemons' copy of conf/secure, with Spark's own (INFO) log: HostCluster reads the
    # master's address and ports from it.
    conf_dir = workdir / "conf-secure"
    shutil.copytree(ROOT / "conf" / "secure", conf_dir)
    (conf_dir / "log4j2.properties").unlink()
    subnet = pick_subnet(worker_number(worker_id), root_networks())
    with Network(subnet, label="intruder") as network:
        hosts = {
            name: network.add_host(name) for name in ("master", "worker", "driver", "intruder")
        }
        cluster = HostCluster(
            workdir / "cluster",
            hosts["master"],
            [hosts["worker"]],
            conf_dir=conf_dir,
            env={"STREAMING_APP_SPARK_SECRET_FILE": str(secret_file)},
        )
        cluster.env["SPARK_LOCAL_DIRS"] = str(workdir / "cluster" / "local")
        try:
            cluster.start()
            yield Site(network, hosts, cluster, secret, secret_file)
        finally:
            cluster.stop()


def engine_args(engine: str, dirs: dict[str, Path], driver: str) -> list[str]:
    """The app's command line: files source and sink on the shared file system, the UI on,
    the Prometheus endpoint on the driver's address."""
    extra = ["--engine", engine] if engine == "structured" else []
    return [
        *extra,
        *files_args(
            dirs, "--allow-local-checkpoint", "--stop-timeout", "90",
            # Seven JVMs and more share two cores: 4 s batches catch up after a slow one.
            "--batch-interval", "4", "--checkpoint-interval", "8", "--snapshot-interval", "20",
            "--spark-conf", "spark.ui.enabled=true",
            "--spark-conf", f"spark.ui.port={UI_PORT[engine]}",
            "--metrics-port", str(METRICS_PORT[engine]), "--metrics-host", driver,
        ),
    ]  # fmt: skip


def served_paths(environment: Any) -> list[str]:
    """What the driver's file server hands out, as its UI lists it: files/NAME, jars/NAME."""
    entries = [path for path, _source in environment.get("classpathEntries", [])]
    for _key, value in environment.get("sparkProperties", []):
        entries += value.split(",")
    return sorted(set(re.findall(r"spark://[^/\s,]+/((?:files|jars)/[^\s,]+)", " ".join(entries))))


def ui_pages(
    intruder: Intruder, operators: dict[str, Intruder], pages: dict[str, tuple[int, str]]
) -> dict[str, dict[str, Any]]:
    """Each UI page asked for by the intruder at its host's address, and by an operator on
    that host's loopback (the control: where a tunnel or a proxy on the host arrives)."""
    seen: dict[str, dict[str, Any]] = {}
    for name, (port, path) in pages.items():
        host = operators[name].host
        got = intruder.now("http", "GET", f"http://{host.address}:{port}{path}")
        local = operators[name].now("http", "GET", f"http://127.0.0.1:{port}{path}")
        seen[name] = {
            "intruder": got.get("status", got.get("error")),
            "intruder_connect": intruder.now("connect", host.address, str(port))["connect"],
            "operator": local.get("status", local.get("error")),
        }
    return seen


def scrape_checks(
    prometheus: Prometheus, intruder: Intruder, metrics_url: str, texts: list[str], workdir: Path
) -> dict[str, Any]:
    """What Prometheus (on the intruder's host) holds of the driver's job once it has seen
    every line read so far; the endpoint's text, fetched from that host, and every series
    Prometheus stored are saved under workdir/scraped for the secrets scan."""
    saved = workdir / "scraped"
    saved.mkdir()
    lines = sum(len(t.splitlines()) for t in texts)
    job = f'{{job="{JOB}"}}'
    prometheus.wait_ready()
    waited = prometheus.until(
        lambda: prometheus.value(f"streaming_app_records_total{job}") == lines,
        f"Prometheus sees the {lines} lines read",
        60,
    )
    got = intruder.now("http", "GET", metrics_url, "--save", str(saved / "metrics.txt"))
    assert got.get("status") == 200, got
    stored = prometheus.api("query", query=job)
    (saved / "series.json").write_text(json.dumps(stored))
    (info,) = [
        series["metric"]
        for series in stored["result"]
        if series["metric"]["__name__"] == "streaming_app_info"
    ]
    return {
        "waited_s": round(waited, 1),
        "up": prometheus.value(f"up{job}"),
        "batches": prometheus.value(f"streaming_app_batches_total{job}"),
        "records": prometheus.value(f"streaming_app_records_total{job}"),
        "info": info,
        "instance": info["instance"],
        "series": len(stored["result"]),
        "text_bytes": (saved / "metrics.txt").stat().st_size,
    }


# The structured run is the same cluster and secret: `slow`, to keep CI's time.
@pytest.mark.parametrize("engine", ["dstream", pytest.param("structured", marks=pytest.mark.slow)])
def test_a_host_without_the_secret_gets_nothing_while_the_app_counts_exactly(
    site: Site, engine: str, tmp_path: Path
) -> None:
    hosts, cluster, secret = site.hosts, site.cluster, site.secret
    master, driver = hosts["master"].address, hosts["driver"].address
    # The UIs as the operator reaches them: each host's loopback (conf/secure/spark-env.sh).
    master_ui = f"http://127.0.0.1:{cluster.master_ui}"
    driver_ui = f"http://127.0.0.1:{UI_PORT[engine]}"
    dirs = {name: tmp_path / name for name in ("checkpoint", "input", "output")}
    dirs["input"].mkdir()
    rng = random.Random(39)
    # Long random tokens: one found in the capture cannot be there by chance.
    words = [f"in{secrets.token_hex(12)}" for _ in range(WORDS)]
    texts: list[str] = []

    def add(name: str) -> None:
        lines = (" ".join(rng.choices(words, k=6)) for _ in range(rng.randint(20, 40)))
        texts.append("".join(f"{line}\n" for line in lines))
        drop_file(dirs["input"], name, texts[-1].encode())

    metrics_url = f"http://{driver}:{METRICS_PORT[engine]}/metrics"
    # Settings the files source and sink do not use: were any value to reach the metrics.
    passwords = {name: secrets.token_hex(16) for name in ("sasl_plain_password", "ssl_password")}
    # (g): Prometheus on the intruder's host (stopped by its PID in the `finally` below; by
    # the network at the end, whatever happens before that).
    prometheus = Prometheus(
        tmp_path / "prometheus", f"{driver}:{METRICS_PORT[engine]}", rules=None,
        host=hosts["intruder"],
    )  # fmt: skip
    capture = Capture(site.network, tmp_path / "bridge.pcap")
    command_lines = CommandLines(secret)
    command_lines.start()
    submit_args = [
        "--master", cluster.master_url,
        "--conf", f"spark.driver.host={driver}",
        "--conf", f"spark.driver.port={DRIVER_PORT[engine]}",
        "--conf", f"spark.local.dir={tmp_path / 'driver-local'}",
        "--executor-memory", "512m",  # fits the worker's 1 GiB
    ]  # fmt: skip
    app = SubmittedApp(
        submit_args,
        engine_args(engine, dirs, driver),
        tmp_path,
        "submit",
        on=hosts["driver"],
        # The one switch of docs/security.md, as an operator gives it.
        env={
            "SPARK_CONF_DIR": str(ROOT / "conf" / "secure"),
            "STREAMING_APP_SPARK_SECRET_FILE": str(site.secret_file),
            **{f"STREAMING_APP_{name.upper()}": value for name, value in passwords.items()},
        },
    )
    intruder = Intruder(hosts["intruder"], tmp_path)
    # The fetch's positive control: on the driver's host, Spark's file server with no
    # secret serving a file, as an unsecured driver serves its --py-files zip.
    on_driver = Intruder(hosts["driver"], tmp_path)
    # The operator on each host, as an SSH tunnel or a proxy there reaches its UI: no secret.
    operators = {"driver": on_driver}
    operators.update({name: Intruder(hosts[name], tmp_path) for name in ("master", "worker")})
    control_file = tmp_path / "served-control.txt"
    control_file.write_bytes(secrets.token_hex(16).encode())
    on_driver.start("control-server", "serve", driver, str(CONTROL_PORT), str(control_file), "900")
    try:
        with cluster.logs_on_failure():
            app.wait_for_log(STARTED[engine], timeout=180)
            # (a), (b): applications and drivers of the intruder's, in the background (an
            # application that the master never answers takes Spark 3 x 20 s to give up).
            spark_master = f"spark://{master}:{MASTER_PORT}"
            intruder.start("no-secret", "job", spark_master, "intruder-no-secret")
            wrong = secrets.token_hex(32)
            intruder.start("wrong-secret", "job", spark_master, "intruder-wrong", "--secret", wrong)
            payload = sorted((SPARK_HOME / "jars").glob("spark-core_*.jar"))[0]
            intruder.start_command(
                "cluster-submit",
                [str(SPARK_HOME / "bin" / "spark-submit"), "--master", spark_master,
                 "--deploy-mode", "cluster", "--name", "intruder-driver",
                 "--class", "org.apache.spark.deploy.SparkSubmit", str(payload)],
            )  # fmt: skip
            add("a.txt")
            wait_for_totals(dirs["output"], truth(texts), app, timeout=150)
            (app_id,) = [a["id"] for a in cluster.master_json()["activeapps"]]

            rest = intruder.now("connect", master, str(REST_PORT))
            rpc = intruder.now("connect", master, str(MASTER_PORT))  # the control

            # (h): no UI page for the intruder; the same pages on each host's loopback.
            assert cluster.master_ui == MASTER_UI_PORT, cluster.master_ui
            pages = ui_pages(
                intruder,
                operators,
                {
                    "master": (MASTER_UI_PORT, "/json/"),
                    "worker": (WORKER_UI_PORT, "/json/"),
                    "driver": (UI_PORT[engine], f"/api/v1/applications/{app_id}/environment"),
                },
            )

            # (d): the master UI's kill and the driver UI's kill links, tried from where the
            # UIs answer (whoever reaches them there has no kill either).
            master_kill = operators["master"].now("kill-app", master_ui, app_id)

            # (e): the driver's environment, then every file its file server hands out (in
            # the background, while the intruder tries the kill links).
            environment_file = tmp_path / "intruder-environment.json"
            env_api = f"{driver_ui}/api/v1/applications/{app_id}/environment"
            env_got = on_driver.now("http", "GET", env_api, "--save", str(environment_file))
            served = served_paths(json.loads(environment_file.read_text()))
            guesses = [
                f"files/{site.secret_file.name}",
                "files/spark-defaults.conf",
                "files/streaming_app-pyfiles.zip",
            ]
            fetched_dir = tmp_path / "intruder-fetched"
            driver_rpc = f"spark://{driver}:{DRIVER_PORT[engine]}"
            control_uri = on_driver.first_json("control-server", timeout=120)["uri"]
            probes = [*served, *guesses, control_uri]
            intruder.start("fetch", "fetch", driver_rpc, str(fetched_dir), *probes)
            kills = on_driver.now("kill-ui", driver_ui, "10", timeout=200)
            page_file = tmp_path / "intruder-environment.html"
            page = on_driver.now(
                "http", "GET", f"{driver_ui}/environment/", "--save", str(page_file)
            )
            # What the master's and the worker's UIs show whoever reaches them: the cluster,
            # the executor's log.
            seen_dir = tmp_path / "intruder-seen"
            seen_dir.mkdir()
            log_page = f"http://127.0.0.1:{WORKER_UI_PORT}/logPage/"
            log_page += f"?appId={app_id}&executorId=0&logType="
            for name, (reader, url) in {
                "master.json": (operators["master"], f"{master_ui}/json/"),
                "executor-stderr.html": (operators["worker"], f"{log_page}stderr"),
                "executor-stdout.html": (operators["worker"], f"{log_page}stdout"),
            }.items():
                got = reader.now("http", "GET", url, "--save", str(seen_dir / name))
                assert got.get("status") == 200, (url, got)
            fetched = intruder.result("fetch", timeout=120)

            no_secret = intruder.result("no-secret")
            wrong_secret = intruder.result("wrong-secret")
            submit_code, submit_out = intruder.finish("cluster-submit")

            # The app went on through all of it, exactly.
            add("b.txt")
            wait_for_totals(dirs["output"], truth(texts), app, timeout=150)
            state = cluster.master_json()
            jobs_file = tmp_path / "jobs.json"
            jobs_api = f"{driver_ui}/api/v1/applications/{app_id}/jobs"
            assert on_driver.now("http", "GET", jobs_api, "--save", str(jobs_file))["status"] == 200
            # (g): what Prometheus scraped from the driver's endpoint, and the text itself.
            scraped = scrape_checks(prometheus, intruder, metrics_url, texts, tmp_path)
            assert app.terminate(timeout=150) == 0, app.log()[-4000:]
    finally:
        app.stop_if_running()
        for proc, _out in [*intruder.started.values(), *on_driver.started.values()]:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        prometheus.stop()
        command_lines.stop()
        pcap = capture.stop()

    outcome = {
        "no secret": no_secret,
        "wrong secret": wrong_secret,
        "cluster submit": (submit_code, submit_out[-1500:]),
        "rest": rest,
        "ui pages": pages,
        "master kill": master_kill,
        "kill links": kills,
        "fetched": fetched,
        "prometheus": scraped,
    }
    print(json.dumps(outcome, indent=1, default=str))

    # (a), (c): no application of the intruder's registered, and no job of its ran.
    names = {a["name"] for a in state["activeapps"] + state["completedapps"]}
    assert not names & {"intruder-no-secret", "intruder-wrong"}, names
    assert "Registering app intruder" not in cluster.master_log.read_text(), cluster.logs()
    assert not no_secret["ran"] and not wrong_secret["ran"], outcome
    for label in ("no-secret", "wrong-secret"):  # refused at the master, which Spark gave up
        said = (tmp_path / f"intruder-{label}.out").read_text(errors="replace")
        assert "All masters are unresponsive! Giving up." in said, said[-3000:]
    # (b): the REST submission server is off (conf/secure), the RPC port refuses the driver.
    assert rpc == {"connect": "accepted"}, rpc
    assert rest == {"connect": "refused"}, rest
    assert submit_code != 0, submit_out[-3000:]
    drivers = state.get("activedrivers", []) + state.get("completeddrivers", [])
    assert drivers == [], drivers
    assert "Driver submitted" not in cluster.master_log.read_text(), cluster.logs()
    # (h): the intruder's host gets no page of any UI (its connection refused: they listen on
    # their hosts' loopback), while each host's loopback shows it (the operator's way in).
    for name, seen in pages.items():
        assert seen["operator"] == 200, (name, pages)
        assert seen["intruder_connect"] == "refused", (name, pages)
        assert "Connection refused" in str(seen["intruder"]), (name, pages)
    # (d): no kill did anything: the app is the one that started, it ran every batch, no
    # job of it failed, and its totals were exact after the kills.
    assert [a["id"] for a in state["activeapps"]] == [app_id], state["activeapps"]
    # No UI shows a kill link (conf/secure: spark.ui.killEnabled false). Where one is shown,
    # its page hands the CSRF token to whoever reads it, and a click from the intruder kills
    # (checked on Spark 4.3.0 with the setting on). The master has no kill route then; the
    # driver's takes only a POST with the token (403 without), and would do nothing.
    assert master_kill["kill_links"] == 0 and kills["kill_links"] == 0, (master_kill, kills)
    assert list(master_kill["statuses"]) == ["POST app/kill: 405"], master_kill
    assert kills["rounds"] >= 1, kills
    assert all(re.search(r": 40[35]$", key) for key in kills["statuses"]), kills
    failed = [job for job in json.loads(jobs_file.read_text()) if job["status"] == "FAILED"]
    assert failed == [], failed
    # (e): the UI shows no secret; what the file server handed out holds none.
    assert env_got["status"] == 200 and page["status"] == 200, (env_got, page)
    # The driver's file server, which answers anyone, has nothing to hand out: the workers
    # import the app installed in their Python (submit.sh's default on a secured cluster).
    assert served == [], served
    assert all("error" in fetched[path] for path in guesses), fetched
    # The same probe, from the same host, did get a file where a file server serves one.
    assert control_uri == f"spark://{driver}:{CONTROL_PORT}/files/{control_file.name}"
    assert fetched[control_uri] == {"bytes": control_file.stat().st_size}, fetched
    (got_control,) = [p for p in fetched_dir.iterdir() if p.name.endswith(control_file.name)]
    assert got_control.read_bytes() == control_file.read_bytes()
    assert find_secrets([environment_file, page_file, seen_dir, fetched_dir], [secret]) == []
    # (g): the driver's series, scraped from another host, with the app's values; neither
    # the text nor any label or value Prometheus stored holds the secret or a password.
    assert scraped["up"] == 1 and scraped["batches"] > 0, scraped
    assert scraped["records"] == sum(len(t.splitlines()) for t in texts), scraped
    assert scraped["info"]["engine"] == engine, scraped
    assert scraped["instance"] == f"{driver}:{METRICS_PORT[engine]}", scraped
    assert find_secrets([tmp_path / "scraped"], [secret, *passwords.values()]) == []
    # (f): nothing readable on the wire; the capture did see the intruder's plain HTTP (its
    # read of the driver's /metrics). It saw that, and the Spark RPC of the driver (tasks and their
    # results, 0.7-2 MB a run) and of the master. The worker's port has none: the worker
    # keeps the connection it opened to the master.
    assert b"GET /metrics" in pcap, "the capture saw none of the intruder's requests"
    carried = tcp_payload_by_port(pcap)
    assert carried[DRIVER_PORT[engine]] > 0, carried.most_common(10)
    assert carried[MASTER_PORT] > 0, carried.most_common(10)
    on_the_wire = [word for word in words if word.encode() in pcap]
    assert on_the_wire == [], f"{len(on_the_wire)} of {WORDS} input words in the capture"
    assert find_secrets([capture.path], [secret]) == []
    # No command line held the secret; no file the run left holds it.
    assert command_lines.reads > 10
    assert command_lines.found == set(), command_lines.found
    left = [tmp_path, cluster.workdir]
    assert find_secrets(left, [secret]) == []
    # Nothing the test started on the driver's or the intruder's host runs on.
    running = {name: pids_on(hosts[name]) for name in ("driver", "intruder")}
    assert not any(running.values()), running


# A kill link of the driver's jobs page (Spark 4.3.0, spark.ui.killEnabled true).
KILL_LINK = """<form action="/jobs/job/kill/" method="POST" class="d-inline float-end">
        <input type="hidden" name="id" value="0"/>
        <input type="hidden" name="csrfToken" value="86c6a5b58349c7b8e6f991750e5c2f63"/>
        <a href="#" data-kill-message="Are you sure you want to kill job 0 ?"
           class="kill-link">(kill)</a>
      </form>"""


def test_the_intruder_submits_a_kill_link_as_a_click_would() -> None:
    """What kill-ui posts for a link: its action and fields, the page's CSRF token included."""
    forms = parse_kill_forms("http://10.0.0.1:4040/jobs/", f"<p>{KILL_LINK}</p>")
    token = "86c6a5b58349c7b8e6f991750e5c2f63"
    assert forms == [("http://10.0.0.1:4040/jobs/job/kill/", f"id=0&csrfToken={token}")]


# Issue 57, item 1: each way of turning authentication on (the test above gives the
# environment's), and the fetch's positive control (code shipped on purpose).
WAYS = ("flag", "config-file", "spark-defaults", "zip-on-purpose")
WAYS_DRIVER_PORT, WAYS_UI_PORT = 7103, 4043


@pytest.mark.slow  # four runs of the app on the cluster; the plan of each way is a unit test
@pytest.mark.parametrize("way", WAYS)
def test_every_way_of_turning_authentication_on_ships_no_code(
    site: Site, way: str, tmp_path: Path
) -> None:
    """scripts/submit.sh on the secured cluster with the secret given one way: the secured
    deployment every time (no code on the driver's file server for a host without the
    secret, the app's worker daemon), exact; with `STREAMING_APP_CODE=zip` given on
    purpose, the same probe fetches the zip (the control)."""
    hosts, cluster = site.hosts, site.cluster
    driver = hosts["driver"].address
    dirs = {name: tmp_path / name for name in ("checkpoint", "input", "output")}
    dirs["input"].mkdir()
    conf_dir, env, extra = ROOT / "conf", {}, []
    if way == "flag":
        extra = ["--spark-secret-file", str(site.secret_file)]
    elif way == "config-file":
        config = tmp_path / "app.ini"
        config.write_text(f"[security]\nspark_secret_file = {site.secret_file}\n")
        extra = ["--config", str(config)]
    elif way == "spark-defaults":  # spark.authenticate true there; Spark's own variable
        conf_dir, env = ROOT / "conf" / "secure", {"_SPARK_AUTH_SECRET": site.secret}
    else:
        conf_dir = ROOT / "conf" / "secure"
        env = {
            "STREAMING_APP_SPARK_SECRET_FILE": str(site.secret_file),
            "STREAMING_APP_CODE": "zip",
        }
    submit_args = [
        "--master", cluster.master_url,
        "--conf", f"spark.driver.host={driver}",
        "--conf", f"spark.driver.port={WAYS_DRIVER_PORT}",
        "--conf", f"spark.local.dir={tmp_path / 'driver-local'}",
        "--executor-memory", "512m",
    ]  # fmt: skip
    run_args = files_args(
        dirs, "--allow-local-checkpoint", *extra,
        "--spark-conf", "spark.ui.enabled=true", "--spark-conf", f"spark.ui.port={WAYS_UI_PORT}",
    )  # fmt: skip
    app = SubmittedApp(
        submit_args, run_args, tmp_path, "submit", on=hosts["driver"],
        env={"SPARK_CONF_DIR": str(conf_dir), **env},
    )  # fmt: skip
    intruder, on_driver = Intruder(hosts["intruder"], tmp_path), Intruder(hosts["driver"], tmp_path)
    text = "".join(f"w{n % 7} w{n % 3}\n" for n in range(40))
    try:
        with cluster.logs_on_failure():
            app.wait_for_log(STARTED["dstream"], timeout=180)
            drop_file(dirs["input"], "a.txt", text.encode())
            wait_for_totals(dirs["output"], truth([text]), app, timeout=150)
            (app_id,) = [a["id"] for a in cluster.master_json()["activeapps"]]
            environment_file = tmp_path / "environment.json"
            api = f"http://127.0.0.1:{WAYS_UI_PORT}/api/v1/applications/{app_id}/environment"
            got = on_driver.now("http", "GET", api, "--save", str(environment_file))
            zip_path = "files/streaming_app-pyfiles.zip"
            fetched_dir = tmp_path / "fetched"
            rpc = f"spark://{driver}:{WAYS_DRIVER_PORT}"
            intruder.start("fetch", "fetch", rpc, str(fetched_dir), zip_path)
            fetched = intruder.result("fetch", timeout=120)
    finally:
        app.stop_if_running()
    assert got.get("status") == 200, got
    properties = dict(json.loads(environment_file.read_text())["sparkProperties"])
    daemon = properties.get("spark.python.daemon.module")
    plan = re.findall(r"STREAMING_APP_CODE=(\w+)", app.log())
    if way == "zip-on-purpose":
        # The control: the same probe from the same host fetches the code the driver ships.
        assert fetched[zip_path].get("bytes", 0) > 0, fetched
        assert daemon != "streaming_app.lifecycle.worker_daemon", daemon  # Spark's own
        assert plan == ["zip"], app.log()[-3000:]
    else:
        assert "error" in fetched[zip_path], fetched
        assert plan == ["installed", "installed"], app.log()[-3000:]
        assert daemon == "streaming_app.lifecycle.worker_daemon", daemon
        assert not properties.get("spark.submit.pyFiles"), properties
