"""A warning when a secured standalone cluster's master still serves REST submissions.

Driver side, before the SparkContext exists. Spark's standalone master can run a REST
submission server (port 6066 by default, `spark.master.rest.port`). It authenticates
nothing: any host that reaches it can start a driver on the cluster, and that driver is
given the cluster's secret. `conf/secure` turns it off (`spark.master.rest.enabled false`);
an operator who followed Spark's own security page instead may have left it on. So a run
with authentication on against a `spark://` master knocks once on each master host's
REST port and, if a REST server answers, says so in one line.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)

DEFAULT_PORT = 6066  # Spark's spark.master.rest.port
# A status request for a submission that does not exist: any REST server answers it
# (with an error), and it submits nothing.
_PROBE = b"GET /v1/submissions/status/streaming-app-probe HTTP/1.0\r\n\r\n"


def master_hosts(master: str) -> list[str]:
    """The hosts of a standalone master URL (spark://h1:7077,h2:7077), else []."""
    if not master.startswith("spark://"):
        return []
    return [part.rsplit(":", 1)[0] for part in master[len("spark://") :].split(",") if part]


def rest_server_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether an HTTP server answers on host:port (a REST submission server's port)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_PROBE)
            return sock.recv(5) == b"HTTP/"
    except OSError:
        return False


def warn_open_rest_server(master: str, settings: Mapping[str, str]) -> list[str]:
    """Warn (once per host) if authentication is on and a master host's REST submission
    port answers; returns the addresses that answered."""
    if str(settings.get("spark.authenticate", "false")).lower() != "true":
        return []
    port = int(settings.get("spark.master.rest.port", DEFAULT_PORT))
    answered = [f"{h}:{port}" for h in master_hosts(master) if rest_server_answers(h, port)]
    for address in answered:
        log.warning(
            "the standalone master's REST submission server answers at %s: it authenticates "
            "nothing, so any host that reaches it can run a driver there, which gets the "
            "cluster's secret; set spark.master.rest.enabled false on the master "
            "(conf/secure/spark-defaults.conf does; docs/security.md)",
            address,
        )
    return answered
