"""A secured standalone cluster (conf/secure): the secret rotated between two runs on one
checkpoint, exact totals, and the secret in no file the runs leave and no command line.

The first run gives the secret as Spark's security docs tell standalone users, in
`spark-defaults.conf` of every process; the second, after the daemons restart with a new
secret, gives it as docs/security.md does, through a file (`--spark-secret-file` for the
app, conf/secure/spark-env.sh for the daemons). Spark alone would recover the second run's
driver with the first secret from the checkpoint, and the master would refuse it.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster_helpers import ROOT, Cluster, SubmittedApp
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for, wait_for_totals
from tests.integration.test_cluster import totals_command
from tests.secrets_scan import find_secrets

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(540)]

# spark-submit's arguments beyond the master: the driver on loopback, no UI.
SUBMIT_ARGS = [
    "--conf", "spark.ui.enabled=false",
    "--conf", "spark.driver.host=127.0.0.1",
    "--conf", "spark.driver.bindAddress=127.0.0.1",
    "--executor-memory", "512m",
]  # fmt: skip


def secure_conf_dir(target: Path, secret: str | None) -> Path:
    """A copy of conf/secure; with `secret`, also in its spark-defaults.conf (Spark's way)."""
    shutil.copytree(ROOT / "conf" / "secure", target, symlinks=False)
    # Spark's own INFO log, which Cluster reads the daemons' addresses from.
    (target / "log4j2.properties").unlink()
    if secret is not None:
        with open(target / "spark-defaults.conf", "a", encoding="utf-8") as defaults:
            defaults.write(f"\nspark.authenticate.secret  {secret}\n")
    return target


def secret_file(path: Path, secret: str) -> Path:
    """The secret in a file only its owner reads."""
    path.write_text(secret + "\n")
    path.chmod(0o600)
    return path


class SecureCluster(Cluster):
    """A master and a worker on 127.0.0.1 with `conf_dir` as SPARK_CONF_DIR, `env` added."""

    def __init__(self, workdir: Path, conf_dir: Path, env: dict[str, str]) -> None:
        super().__init__(workdir)
        # The REST submission server is off through conf/secure, not the test's override.
        self.env.pop("SPARK_MASTER_OPTS", None)
        self.env.update(SPARK_CONF_DIR=str(conf_dir), **env)


def command_lines() -> list[bytes]:
    """Every process's command line."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    return lines


@pytest.fixture
def started() -> Iterator[list[object]]:
    """Clusters and apps to stop at the end, whatever happened."""
    things: list[object] = []
    yield things
    for thing in reversed(things):
        if isinstance(thing, SubmittedApp):
            thing.stop_if_running()
        elif isinstance(thing, Cluster):
            thing.stop()


# `slow` since 2026-11-30, in the rotating shares (to keep CI within its time). In the
# `not slow` suite: each way the secret reaches the driver, and the intruder.
@pytest.mark.slow
def test_the_secret_rotated_between_two_runs_on_one_checkpoint_exact_and_nowhere_at_rest(
    dirs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    started: list[object],
) -> None:
    first, second = f"first-{secrets.token_hex(16)}", f"second-{secrets.token_hex(16)}"
    confs = tmp_path / "confs"  # outside what the scan reads: the first one holds a secret
    rng = random.Random(39)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, 30))
        drop_file(dirs["input"], name, texts[-1].encode())

    run_args = files_args(
        dirs, "--allow-local-checkpoint", "--batch-interval", "2", "--checkpoint-interval", "4",
        "--stop-timeout", "90",
    )  # fmt: skip

    def submit(cluster: Cluster, name: str, *extra: str) -> SubmittedApp:
        app = SubmittedApp(
            ["--master", cluster.master_url, *SUBMIT_ARGS], [*run_args, *extra], tmp_path, name
        )
        started.append(app)
        return app

    def no_secret_in_any_command_line() -> None:
        for line in command_lines():
            assert first.encode() not in line and second.encode() not in line, line

    # 1. The secret in spark-defaults.conf, as Spark's docs say.
    conf = secure_conf_dir(confs / "first", first)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    cluster = SecureCluster(tmp_path / "cluster1", conf, {})
    started.append(cluster)
    cluster.start()
    with cluster.logs_on_failure():
        app = submit(cluster, "submit1")
        app.wait_for_log(r"Started new streaming context", timeout=180)
        add("a.txt")
        wait_for_totals(dirs["output"], truth(texts), app, timeout=180)
        no_secret_in_any_command_line()
        assert app.terminate() == 0, app.log()[-4000:]
        wait_for(
            "the app to leave the master",
            lambda: not cluster.master_json()["activeapps"],
            pause=0.5,
        )
    cluster.stop()

    # 2. A new secret, from a file, for the daemons and the app; the same checkpoint.
    conf = secure_conf_dir(confs / "second", None)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    secret_path = secret_file(confs / "spark-secret", second)
    env = {"STREAMING_APP_SPARK_SECRET_FILE": str(secret_path)}
    cluster = SecureCluster(tmp_path / "cluster2", conf, env)
    started.append(cluster)
    cluster.start()
    with cluster.logs_on_failure():
        add("b-while-down.txt")
        app = submit(cluster, "submit2", "--spark-secret-file", str(secret_path))
        app.wait_for_log(r"Recovered streaming context from checkpoint", timeout=180)
        add("c.txt")
        wait_for_totals(dirs["output"], truth(texts), app, timeout=180)
        no_secret_in_any_command_line()
        (registered,) = cluster.master_json()["activeapps"]
        assert app.terminate() == 0, app.log()[-4000:]
    assert "Creating new context" not in app.log(), "the factory ran on recovery"
    assert "holds the cluster's secret" not in app.log()
    # conf/secure turns the master's REST submission server off: nothing to warn of.
    assert "REST submission server answers" not in app.log()
    assert totals_command(dirs["output"]) == truth(texts)
    # It ran on the cluster, authenticated with the second secret: an executor ran tasks.
    stderr = [p.read_text() for p in (cluster.work_dir / registered["id"]).glob("*/stderr")]
    assert any("Finished task" in text for text in stderr), cluster.logs()

    # Nothing either run left holds either secret: checkpoint (decompressed), output,
    # snapshots, the apps' logs, the daemons' logs and the executors' directories.
    left = [dirs["checkpoint"], dirs["output"], tmp_path / "cluster1", tmp_path / "cluster2"]
    left += sorted(tmp_path.glob("submit*.log"))
    assert find_secrets(left, [first, second]) == []
    assert os.listdir(dirs["checkpoint"])  # the scan had something to read


def test_each_way_the_secret_reaches_the_driver_works_on_its_own(
    dirs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    started: list[object],
) -> None:
    # The daemons hold the secret from a file through conf/secure's spark-env.sh. The
    # driver gets it one way at a time, with a conf directory that has no spark-env.sh and
    # no secret in its spark-defaults.conf: the file alone (no _SPARK_AUTH_SECRET in its
    # environment), then Spark's variable alone (no file). A way that did not reach Spark
    # would leave the driver with another secret than the file's, which verify_resolved
    # refuses in one line, exit 2 (tests/unit/lifecycle/test_spark_secret.py::
    # test_the_secret_spark_takes_is_checked_after_the_start), and the run would fail.
    # (spark-defaults.conf alone: the first run of the test above.)
    secret = f"alone-{secrets.token_hex(16)}"
    confs = tmp_path / "confs"
    secret_path = secret_file(tmp_path / "spark-secret", secret)
    daemons = secure_conf_dir(confs / "daemons", None)
    driver = secure_conf_dir(confs / "driver", None)
    (driver / "spark-env.sh").unlink()
    cluster = SecureCluster(
        tmp_path / "cluster", daemons, {"STREAMING_APP_SPARK_SECRET_FILE": str(secret_path)}
    )
    started.append(cluster)
    cluster.start()
    monkeypatch.setenv("SPARK_CONF_DIR", str(driver))
    monkeypatch.delenv("_SPARK_AUTH_SECRET", raising=False)
    rng = random.Random(45)
    texts: list[str] = []
    submit_args = ["--master", cluster.master_url, *SUBMIT_ARGS]
    run_args = files_args(
        dirs, "--allow-local-checkpoint", "--batch-interval", "2", "--stop-timeout", "90"
    )
    ways = {
        "file": (["--spark-secret-file", str(secret_path)], {}),
        "environment": ([], {"_SPARK_AUTH_SECRET": secret}),
    }
    with cluster.logs_on_failure():
        for number, (way, (extra, env)) in enumerate(ways.items()):
            app = SubmittedApp(submit_args, [*run_args, *extra], tmp_path, f"{way}", env=env)
            started.append(app)
            app.wait_for_log(r"(Started new|Recovered) streaming context", timeout=180)
            texts.append(make_text(rng, 20))
            drop_file(dirs["input"], f"{number}-{way}.txt", texts[-1].encode())
            wait_for_totals(dirs["output"], truth(texts), app, timeout=180)
            (registered,) = cluster.master_json()["activeapps"]
            assert app.terminate() == 0, app.log()[-4000:]
            stderr = [p.read_text() for p in (cluster.work_dir / registered["id"]).glob("*/stderr")]
            assert any("Finished task" in text for text in stderr), (way, cluster.logs())
            wait_for(
                "the app to leave the master",
                lambda: not cluster.master_json()["activeapps"],
                pause=0.5,
            )
    assert totals_command(dirs["output"]) == truth(texts)
    assert find_secrets([dirs["checkpoint"], *sorted(tmp_path.glob("*.log"))], [secret]) == []
