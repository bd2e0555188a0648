"""The hosts fixture itself: hosts reach each other over TCP, a cut stops it, heal restores it."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streaming_app.tools.processes import group_alive
from tests.integration import netns

pytestmark = pytest.mark.timeout(120)

# Echoes one line per connection, forever: killed by the network's close().
ECHO_SERVER = """
import socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
while True:
    conn, _ = server.accept()
    with conn:
        conn.sendall(b"echo " + conn.recv(100))
"""
# One exchange within a time limit; prints the reply or the error's name.
CLIENT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        s.sendall(b"ping")
        print(s.recv(100).decode())
except OSError as exc:
    print(type(exc).__name__)
"""
PORT = 7070


def exchange(client: netns.Host, server: netns.Host, timeout: float = 2) -> str:
    """What one connection from `client` to the echo server on `server` gets back."""
    args = [sys.executable, "-c", CLIENT, server.address, str(PORT), str(timeout)]
    return client.run(args, timeout=timeout + 30).stdout.strip()


def wait_for_echo(client: netns.Host, server: netns.Host, timeout: float = 30) -> str:
    """The first echo within `timeout`, else the last reply: the server may still be
    starting (refused), and just after a heal the client's kernel may still hold the
    neighbour entry that failed during the cut (no route to host, an OSError)."""
    deadline = time.monotonic() + timeout
    while True:
        reply = exchange(client, server)
        if reply.startswith("echo ") or time.monotonic() > deadline:
            return reply
        time.sleep(0.2)


def test_hosts_talk_over_tcp_until_cut_and_again_once_healed(network: netns.Network) -> None:
    db, app = network.add_host("db"), network.add_host("app")
    assert db.address != app.address
    assert ipaddress.ip_address(db.address) in network.subnet
    shown = db.run(["ip", "-4", "-o", "addr", "show", "dev", "eth0"]).stdout
    assert f"{db.address}/24" in shown
    db.popen([sys.executable, "-c", ECHO_SERVER, db.address, str(PORT)])
    assert wait_for_echo(app, db) == "echo ping"

    network.cut(db)
    started = time.monotonic()
    assert exchange(app, db, timeout=2) in ("TimeoutError", "OSError")  # no answer at all
    assert time.monotonic() - started >= 1.5  # it waited: the packets went nowhere
    network.heal(db)
    assert wait_for_echo(app, db) == "echo ping"

    network.cut(app)  # a cut at either end stops the same traffic
    assert exchange(app, db, timeout=2) in ("TimeoutError", "OSError")
    network.heal(app)
    assert wait_for_echo(app, db) == "echo ping"


@pytest.mark.usefixtures("_netns_ready")
def test_close_kills_the_hosts_processes_and_deletes_every_namespace() -> None:
    """What the fixture does after a failing test: nothing of the network is left."""
    subnet = netns.pick_subnet(5, netns.root_networks())
    with pytest.raises(RuntimeError, match="a test fails"), netns.Network(subnet) as net:
        host = net.add_host("h1")
        sleeper = host.popen(["sleep", "600"])
        assert len(net.namespaces()) == 2  # the bridge's and the host's
        raise RuntimeError("a test fails here")
    assert net.namespaces() == []
    assert sleeper.poll() is not None and not group_alive(sleeper.pid)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert net.prefix + "-" not in listed


# A test process killed with its network still up: it prints the network's prefix and the
# pid of a process on one of its hosts, then dies without cleaning up.
KILLED_RUN = """
import os, subprocess
from tests.integration import netns
net = netns.Network(netns.pick_subnet(6, []))
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # the pipe can close
sleeper = net.add_host("h1").popen(["sleep", "600"], **quiet)
print(net.prefix, sleeper.pid, flush=True)
os._exit(0)
"""


@pytest.mark.usefixtures("_netns_ready")
def test_what_a_killed_run_left_behind_is_removed_by_the_next() -> None:
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN], capture_output=True, text=True, cwd=root, timeout=60
    )
    prefix, pid = done.stdout.split()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{prefix}-bridge" in listed and f"{prefix}-h1" in listed
    assert group_alive(int(pid))  # the dead run's process lives on in its namespace

    removed = netns.remove_stale_namespaces()
    assert sorted(removed) == [f"{prefix}-bridge", f"{prefix}-h1"]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix + "-" not in listed
    deadline = time.monotonic() + 10
    while group_alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(int(pid))
