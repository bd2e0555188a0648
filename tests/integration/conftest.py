"""Fixtures for the integration tests: real Spark in local mode, run as a subprocess."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming_app.tools.dev_broker import DevBroker
from tests.integration import netns, pg_host
from tests.integration.harness import App
from tests.integration.pg_helpers import ci, pg_dsn, pg_schema, pg_table

__all__ = ["pg_dsn", "pg_schema", "pg_table"]  # fixtures for every integration test


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration is an integration test; those that build hosts
    of their own are `netns` tests too."""
    for item in items:
        if "tests/integration/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)
        if "_netns_ready" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.netns)


@pytest.fixture(scope="session", autouse=True)
def _java_available() -> None:
    if shutil.which("java") is None:
        pytest.fail("Java 17+ is required by the integration tests (PySpark runs on it)")


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """Fresh checkpoint, input and output directories for one test."""
    paths = {name: tmp_path / name for name in ("checkpoint", "input", "output")}
    paths["input"].mkdir()
    return paths


@pytest.fixture
def started() -> Iterator[list[Any]]:
    """What a test started (Prometheus servers, apps: anything with `stop` or
    `stop_if_running`), stopped at its end, the last first."""
    things: list[Any] = []
    yield things
    for thing in reversed(things):
        thing.stop_if_running() if hasattr(thing, "stop_if_running") else thing.stop()


@pytest.fixture(scope="session")
def _netns_ready() -> None:
    """Skip (in CI: fail) the tests that build hosts, in one line, where they cannot run;
    remove what a killed earlier run left behind (namespaces, then the directories of the
    PostgreSQL servers it ran in them)."""
    reason = netns.unavailable()
    if reason is not None:
        if ci():
            pytest.fail(reason)
        pytest.skip(reason)
    netns.remove_stale_namespaces()
    pg_host.remove_stale_server_dirs()


@pytest.fixture
def network(_netns_ready: None, worker_id: str) -> Iterator[netns.Network]:
    """A bridge on a /24 of this xdist worker's own; everything it made is removed at the end."""
    subnet = netns.pick_subnet(netns.worker_number(worker_id), netns.root_networks())
    with netns.Network(subnet) as net:
        yield net


@pytest.fixture
def start_app(tmp_path: Path) -> Iterator[object]:
    """Start `streaming-app run ARGS` (on a namespace host: `on=`, COMMAND: `command=`);
    every app started is killed at the end of the test."""
    started: list[App] = []

    def start(
        *args: str,
        env: dict[str, str] | None = None,
        on: netns.Host | None = None,
        command: str = "run",
    ) -> App:
        prefix = on.command([]) if on is not None else None
        name = f"run{len(started) + 1}"
        app = App(list(args), tmp_path, name, command=command, env=env, prefix=prefix)
        started.append(app)
        return app

    yield start
    for app in started:
        app.stop_if_running()


def common_args(dirs: dict[str, Path]) -> list[str]:
    """Checkpoint, files sink and fast settings shared by every test run of the app."""
    return [
        "--checkpoint-dir", str(dirs["checkpoint"]),
        "--output-dir", str(dirs["output"]),
        "--sink", "files",
        "--batch-interval", "1",
        "--checkpoint-interval", "2",
        # Snapshots every 10 s: exercised everywhere, without doubling the work of 2 cores.
        "--snapshot-interval", "10",
        "--spark-conf", "spark.ui.enabled=false",
    ]  # fmt: skip


def files_args(dirs: dict[str, Path], *extra: str) -> list[str]:
    """The command line of a files-source run with the files sink."""
    return ["--source", "files", "--input-dir", str(dirs["input"]), *common_args(dirs), *extra]


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Kafka-protocol broker: KAFKA_BOOTSTRAP if set, else tansu on a free loopback port."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    with open(log_path, "wb") as log, DevBroker(log=log) as broker:
        yield broker.bootstrap


def kafka_args(dirs: dict[str, Path], bootstrap: str, topics: str, *extra: str) -> list[str]:
    """The command line of a Kafka-source run with the files sink.

    Two-second batches: a Kafka batch has more output work (the commit log) than a files
    batch, and on two cores one-second batches would queue up, so that a graceful stop
    could time out with completed batches that the checkpoint does not know about yet.
    """
    return [
        "--source", "kafka", "--bootstrap-servers", bootstrap, "--topics", topics,
        *common_args(dirs), "--batch-interval", "2", "--checkpoint-interval", "4", *extra,
    ]  # fmt: skip
