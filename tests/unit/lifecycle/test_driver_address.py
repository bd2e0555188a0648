"""A cluster driver that would advertise loopback (conf/secure's SPARK_LOCAL_IP) is refused."""

from __future__ import annotations

import pytest

from streaming_app.errors import ConfigError
from streaming_app.lifecycle.driver_address import check_driver_address, is_loopback


def test_loopback_names() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.0.1.1") and is_loopback("localhost")
    assert is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("10.0.0.5") and not is_loopback("master.example")


def test_a_remote_master_with_loopback_and_no_driver_host_is_one_line() -> None:
    with pytest.raises(ConfigError) as raised:
        check_driver_address("spark://10.0.0.2:7077", {}, "127.0.0.1")
    said = str(raised.value)
    assert "\n" not in said
    assert "spark.driver.host is not set and SPARK_LOCAL_IP is 127.0.0.1" in said
    assert "set spark.driver.host to this host's address" in said


@pytest.mark.parametrize(
    ("master", "settings", "local_ip"),
    [
        ("spark://10.0.0.2:7077", {"spark.driver.host": "10.0.0.5"}, "127.0.0.1"),  # given
        ("spark://10.0.0.2:7077", {}, None),  # Spark picks an interface itself
        ("spark://10.0.0.2:7077", {}, "10.0.0.5"),  # an address of the operator's
        ("spark://127.0.0.1:7077", {}, "127.0.0.1"),  # a cluster on this host's loopback
        ("local[2]", {}, "127.0.0.1"),
        ("yarn", {}, "127.0.0.1"),
    ],
)
def test_a_driver_its_executors_reach_passes(
    master: str, settings: dict[str, str], local_ip: str | None
) -> None:
    check_driver_address(master, settings, local_ip)  # the positive controls: no error
