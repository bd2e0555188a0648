"""A cluster driver that would advertise loopback to its executors: one line, exit 2.

Driver side, before the SparkContext exists. `conf/secure/spark-env.sh` sets
`SPARK_LOCAL_IP=127.0.0.1` so that Spark's web UIs, which authenticate nobody, listen on
loopback only (docs/security.md). Spark also takes `SPARK_LOCAL_IP` as the address the driver
advertises when `spark.driver.host` is not set: the executors on other hosts would then
connect to their own loopback and never register, and the application would wait for
resources forever. So a driver of a standalone master on another host, with a loopback
`SPARK_LOCAL_IP` and no `spark.driver.host`, stops at start saying what to set.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from streaming_app.errors import ConfigError
from streaming_app.lifecycle.rest_server import master_hosts


def is_loopback(host: str) -> bool:
    """Whether `host` (an address, or `localhost`) names loopback; other names are not
    resolved (they are taken as reachable)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_driver_address(master: str, settings: Mapping[str, str], local_ip: str | None) -> None:
    """Raise ConfigError when the driver of a `spark://` master on another host would
    advertise `local_ip` (the JVM's SPARK_LOCAL_IP), a loopback address, for want of
    `spark.driver.host`."""
    hosts = master_hosts(master)
    if not hosts or all(is_loopback(host) for host in hosts):
        return  # not standalone, or a cluster on this host's loopback (the tests' own)
    if settings.get("spark.driver.host") or not local_ip or not is_loopback(local_ip):
        return
    raise ConfigError(
        f"spark.driver.host is not set and SPARK_LOCAL_IP is {local_ip} (conf/secure/spark-env.sh "
        "keeps Spark's web UIs on loopback): the executors on other hosts would connect to "
        f"{local_ip}; set spark.driver.host to this host's address that the cluster reaches "
        "(spark-submit --conf spark.driver.host=ADDRESS; docs/security.md)"
    )
