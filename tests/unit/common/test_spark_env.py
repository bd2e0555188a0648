"""The environment the app gives the JVM it launches: Spark on loopback for local masters."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from streaming_app.common.spark_env import prepare_spark_env

LAUNCH = ("SPARK_LOCAL_IP", "PYSPARK_GATEWAY_PORT", "PYSPARK_PYTHON", "PYSPARK_SUBMIT_ARGS")


@pytest.fixture
def launch_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No launch setting in the environment (the suite's own SPARK_LOCAL_IP removed), and
    the whole environment put back afterwards: monkeypatch restores only the names it
    touched, and prepare_spark_env sets others (a PYSPARK_SUBMIT_ARGS left behind would
    give every app this test process starts next its master)."""
    saved = dict(os.environ)
    for name in LAUNCH:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", os.environ.get("SPARK_CONF_DIR", "/nonexistent"))
    yield monkeypatch
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[2,3]", "local-cluster[1,1,1024]"])
def test_a_local_master_binds_spark_to_loopback_when_nothing_says_otherwise(
    launch_env: pytest.MonkeyPatch, master: str
) -> None:
    # Spark's UI, the driver's RPC and block manager bind SPARK_LOCAL_IP's address.
    prepare_spark_env(master, None)
    assert os.environ.get("SPARK_LOCAL_IP") == "127.0.0.1", "Spark would bind every address"


def test_an_address_given_is_kept_and_a_cluster_master_binds_where_spark_decides(
    launch_env: pytest.MonkeyPatch,
) -> None:
    # The positive control of the test above: the same probe sees an address that is not
    # loopback when the operator gives one, and none set for a cluster's driver (which
    # must advertise an address the executors reach: docs/cluster.md).
    launch_env.setenv("SPARK_LOCAL_IP", "10.0.0.5")
    prepare_spark_env("local[2]", None)
    assert os.environ["SPARK_LOCAL_IP"] == "10.0.0.5"
    launch_env.delenv("SPARK_LOCAL_IP")
    prepare_spark_env("spark://10.0.0.1:7077", None)
    assert "SPARK_LOCAL_IP" not in os.environ
