"""The scale-out benchmark's hosts: master, two one-core workers, driver, broker, PostgreSQL.

Built from the cluster tests' helpers (tests/integration: netns.py's Network and Host,
cluster_hosts.py's HostCluster, kafka_host.py's broker, pg_host.py's PostgreSQL server),
imported rather than copied: they are what the cluster tests run on, and a benchmark of
the same hosts should not drift from them. Each process of the benchmark lives on a host
of its own (a network namespace on one bridge); the root namespace has no route to them,
so everything that talks to the broker or the database runs on a host.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.scale.cpu_caps import CpuCaps
from bench.scale.plain import command
from tests.integration.cluster_hosts import HostCluster
from tests.integration.kafka_host import PORT as KAFKA_PORT
from tests.integration.kafka_host import start_broker
from tests.integration.netns import Host, Network, pick_subnet, root_networks, unavailable
from tests.integration.pg_host import PgHost, server_binaries

HOSTS = ("master", "wa", "wb", "driver", "broker", "pg")
WORKERS = ("wa", "wb")


@dataclass
class Scene:
    """The hosts and what runs on them for the whole invocation."""

    workdir: Path
    network: Network
    hosts: dict[str, Host]
    cluster: HostCluster
    bootstrap: str
    pg: PgHost
    caps: CpuCaps | None = None  # the worker hosts' CPU quota (--worker-cpu)

    def namespaces(self) -> list[str]:
        """Every host's namespace: where the CPU sampler looks for processes."""
        return [host.netns for host in self.hosts.values()]

    def load_topic(self, topic: str, lines: int, partitions: int) -> None:
        """The corpus on a new topic, produced from the driver's host."""
        done = self.hosts["driver"].run(
            command(f"p.load({self.bootstrap!r}, {topic!r}, {lines}, {partitions})"),
            timeout=1800,
        )
        if done.returncode != 0:
            raise RuntimeError(f"loading {topic} failed:\n{done.stderr[-3000:]}")

    def plain(self, topic: str, partitions: int, lines: int, processes: int) -> list[Any]:
        """plain Python's count of the whole topic by `processes` processes, one on each
        worker host, the partitions dealt among them; each process's JSON line."""
        at = time.time() + 4  # after every process has imported kafka-python
        started = []
        for index in range(processes):
            mine = list(range(partitions))[index::processes]
            call = f"p.count_child({self.bootstrap!r}, 'TOPIC', {mine}, {lines // processes}, {at})"
            host = self.hosts[WORKERS[index]]
            started.append(host.popen(command(call.replace("TOPIC", topic)), stdout=-1, text=True))
            if self.caps is not None:  # under the host's quota, as its executor would be
                self.caps.add(WORKERS[index], started[-1].pid)
        found = []
        for proc in started:
            out, _ = proc.communicate(timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(f"a plain Python count failed ({proc.returncode})")
            found.append(json.loads(out.strip().splitlines()[-1]))
        return found


@contextlib.contextmanager
def scene(workdir: Path, worker_cpu: float | None = None) -> Iterator[Scene]:
    """The hosts, the broker, PostgreSQL and the cluster (two workers of one core each),
    all stopped and removed after; `worker_cpu`: each worker host held to that share of a
    core (cpu_caps.py)."""
    why = unavailable()
    if why is not None:
        raise SystemExit(f"error: the scale-out benchmark builds hosts of its own: {why}")
    bin_dir = server_binaries()
    if bin_dir is None:
        raise SystemExit("error: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    with Network(pick_subnet(7, root_networks()), "scale") as network:
        hosts = {name: network.add_host(name) for name in HOSTS}
        bootstrap = start_broker(hosts["broker"], workdir / "tansu.log")
        hosts["driver"].wait_for_port(hosts["broker"].address, KAFKA_PORT)
        pg = PgHost(hosts["pg"], bin_dir)
        cluster = HostCluster(
            workdir / "cluster", hosts["master"], [hosts[w] for w in WORKERS], cores=1
        )
        with contextlib.ExitStack() as stack:
            try:
                pg.start()
                cluster.start()
                caps = None
                if worker_cpu:  # the worker daemons now; what they start inherits it
                    namespaces = {w: hosts[w].netns for w in WORKERS}
                    caps = stack.enter_context(CpuCaps(namespaces, worker_cpu))
                yield Scene(workdir, network, hosts, cluster, bootstrap, pg, caps)
            finally:
                cluster.stop()
                pg.stop()
