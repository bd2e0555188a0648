"""Hosts of their own for the tests: network namespaces on one bridge, links cut and healed.

A `Network` is a bridge in a namespace of its own and, per host, a namespace with `lo` up
and one veth link (`eth0`, an address on the network's private /24) plugged into the
bridge. Nothing is added to the root namespace, which has no route to the hosts: a test
talks to them through processes it starts on a host, or through the shared file system
(a Unix socket). `cut` takes a host's link down at the bridge: its processes live on and
its peers see timeouts, as with a pulled cable. `close` kills every process the network
started, by its group, and deletes every namespace, whatever state the test left.

Needs root and `ip` (iproute2); `unavailable()` says in one line why it cannot run here.
DESIGN.md: no netem, no iptables or nft, no ping here.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streaming_app.tools.processes import group_alive, kill_group

# The /24s tried, in order: 10.213.<N>.0/24, N from the worker's number on. Private
# addresses no other network on the machine uses (checked against the root namespace).
SUBNET_BASE = "10.213"
FIRST_OCTET = 10
# Interface names are at most 15 bytes (IFNAMSIZ - 1).
MAX_IFNAME = 15
_IP_TIMEOUT = 30
KILLED_GONE_SECONDS = 10.0
_sequence = itertools.count(1)
# Run on a host: connect to argv[1]:argv[2] until it works or argv[3] seconds have passed.
_WAIT_FOR_PORT = """
import socket, sys, time
deadline = time.monotonic() + float(sys.argv[3])
while True:
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.1)
"""


class NetnsError(RuntimeError):
    """An `ip` command that builds or changes the network failed."""


def worker_number(worker: str | None) -> int:
    """pytest-xdist's worker id (gw0, gw1, ...) as a number; 0 without xdist."""
    match = re.fullmatch(r"gw(\d+)", worker or "")
    return int(match[1]) if match else 0


def pick_subnet(worker: int, in_use: Iterable[str]) -> ipaddress.IPv4Network:
    """The first 10.213.N.0/24 from N = 10 + worker on that overlaps no network in use.

    Workers step by 16, so that two workers never pick the same /24 even when one of
    them had to skip a few taken ones.
    """
    taken = [ipaddress.ip_network(net, strict=False) for net in in_use]
    for third in range(FIRST_OCTET + worker, 256, 16):
        subnet = ipaddress.IPv4Network(f"{SUBNET_BASE}.{third}.0/24")
        if not any(subnet.overlaps(net) for net in taken if net.version == 4):
            return subnet
    raise NetnsError(f"no free {SUBNET_BASE}.N.0/24 for worker {worker}")


def root_networks() -> list[str]:
    """The IPv4 networks the root namespace has addresses or routes on (`ip` output)."""
    found = []
    for command in (["ip", "-4", "-o", "addr"], ["ip", "-4", "route"]):
        out = subprocess.run(command, capture_output=True, text=True, timeout=_IP_TIMEOUT).stdout
        found += re.findall(r"\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)", out)
    return found


def stale_namespaces(listed: str, alive: Callable[[int], bool]) -> list[str]:
    """The namespaces in `ip netns list` output that a test process no longer alive made
    (named sa<PID>-...): what a killed test run (a CI timeout, say) could not remove."""
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    stale = []
    for name in names:
        match = re.match(r"sa(\d+)-\d+-", name)
        if match and int(match[1]) != os.getpid() and not alive(int(match[1])):
            stale.append(name)
    return stale


def remove_stale_namespaces() -> list[str]:
    """Delete the namespaces of dead test processes, after killing what still runs in
    them (processes those tests started); the names removed."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    stale = stale_namespaces(listed, pid_alive)
    killed: list[int] = []
    for name in stale:
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        for pid in pids.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    # Until they are gone (or a few seconds): a PostgreSQL server killed here must be seen
    # gone by the sweep of its directory that follows (pg_host.remove_stale_server_dirs).
    deadline = time.monotonic() + KILLED_GONE_SECONDS
    while any(pid_alive(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    return stale


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a process of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def unavailable() -> str | None:
    """Why namespaces cannot be built here (one line), or None if they can."""
    if os.geteuid() != 0:
        return f"network namespaces need root (the tests run as uid {os.geteuid()})"
    if shutil.which("ip") is None:
        return "network namespaces need `ip` (iproute2), which is not installed"
    name = f"sa-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        reason = (made.stderr.strip().splitlines() or ["no reason given"])[0]
        return f"`ip netns add` was refused: {reason}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=_IP_TIMEOUT)
    if done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Host:
    """A namespace with its own address on the network; `veth` is its end in the bridge."""

    name: str
    netns: str
    address: str
    veth: str
    network: Network

    def command(self, args: Sequence[str]) -> list[str]:
        """`args` as a command line that runs on this host."""
        return ["ip", "netns", "exec", self.netns, *args]

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start `args` on this host in a session of its own; `close` kills its group."""
        proc = subprocess.Popen(self.command(args), start_new_session=True, **kwargs)
        self.network.processes.append(proc)
        return proc

    def run(self, args: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run `args` on this host to the end; its output as text."""
        return subprocess.run(self.command(args), capture_output=True, text=True, timeout=timeout)

    def wait_for_port(self, address: str, port: int, timeout: float = 30) -> None:
        """Wait until a TCP connection from this host to address:port succeeds."""
        done = self.run([sys.executable, "-c", _WAIT_FOR_PORT, address, str(port), str(timeout)])
        if done.returncode != 0:
            raise NetnsError(f"nothing listens on {address}:{port} seen from {self.name}")


class Network:
    """A bridge and hosts on one private /24, all in namespaces this object made."""

    def __init__(self, subnet: ipaddress.IPv4Network, label: str = "") -> None:
        self.subnet = subnet
        self.prefix = f"sa{os.getpid()}-{next(_sequence)}"
        self.label = label
        self.bridge_ns = f"{self.prefix}-bridge"
        self.hosts: list[Host] = []
        self.processes: list[subprocess.Popen[Any]] = []
        self._namespaces: list[str] = []
        self._add_namespace(self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge_ns, "link", "set", "br0", "up")

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def add_host(self, name: str) -> Host:
        """A new host: its namespace, `lo` up, `eth0` with the next address, on the bridge."""
        number = len(self.hosts) + 2  # .1 is left free, as a gateway's would be
        address = str(self.subnet.network_address + number)
        netns = f"{self.prefix}-{name}"
        veth = f"v{number}-{name}"[:MAX_IFNAME]
        self._add_namespace(netns)
        _ip(
            "link", "add", veth, "netns", self.bridge_ns, "type", "veth",
            "peer", "name", "eth0", "netns", netns,
        )  # fmt: skip
        _ip("-n", self.bridge_ns, "link", "set", veth, "master", "br0", "up")
        _ip("-n", netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        host = Host(name, netns, address, veth, self)
        self.hosts.append(host)
        return host

    def cut(self, host: Host) -> None:
        """Take the host's link down at the bridge: nothing reaches it, nothing leaves it."""
        _ip("-n", self.bridge_ns, "link", "set", host.veth, "down")

    def heal(self, host: Host) -> None:
        """Bring the host's link back up."""
        _ip("-n", self.bridge_ns, "link", "set", host.veth, "up")

    def namespaces(self) -> list[str]:
        """The namespaces named for this network that exist now (none after `close`)."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        names = [line.split()[0] for line in listed.splitlines() if line.strip()]
        return [name for name in names if name.startswith(self.prefix + "-")]

    def close(self) -> None:
        """Kill every process started on a host (its whole group), delete every namespace."""
        for proc in self.processes:
            if proc.poll() is None or group_alive(proc.pid):
                kill_group(proc)
        self.processes.clear()
        errors = []
        for name in reversed(self._namespaces):
            done = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True)
            if done.returncode != 0 and "No such file" not in done.stderr:
                errors.append(f"{name}: {done.stderr.strip()}")
        self._namespaces.clear()
        if errors:
            raise NetnsError("namespaces not deleted: " + "; ".join(errors))
