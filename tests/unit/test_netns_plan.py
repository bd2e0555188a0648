"""The hosts fixture's plan, without building anything: worker numbers and free subnets."""

from __future__ import annotations

import ipaddress

import pytest

from tests.integration import netns


@pytest.mark.parametrize(
    ("worker", "number"), [("gw0", 0), ("gw1", 1), ("gw12", 12), ("master", 0), (None, 0)]
)
def test_worker_number(worker: str | None, number: int) -> None:
    assert netns.worker_number(worker) == number


def test_each_worker_gets_its_own_subnet() -> None:
    assert str(netns.pick_subnet(0, [])) == "10.213.10.0/24"
    assert str(netns.pick_subnet(1, [])) == "10.213.11.0/24"


def test_a_subnet_the_machine_uses_is_skipped_without_meeting_the_next_worker() -> None:
    in_use = ["127.0.0.1/8", "192.0.2.2/24", "10.213.10.7/24", "10.213.27.0/24"]
    assert str(netns.pick_subnet(0, in_use)) == "10.213.26.0/24"
    assert str(netns.pick_subnet(1, in_use)) == "10.213.11.0/24"
    # A route over the whole 10.213.0.0/16 leaves nothing: an error, not an overlap.
    with pytest.raises(netns.NetnsError, match="no free"):
        netns.pick_subnet(0, ["10.0.0.0/8"])


def test_every_subnet_is_private() -> None:
    for worker in range(16):
        assert ipaddress.ip_network(netns.pick_subnet(worker, [])).is_private


def test_without_root_the_reason_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert netns.unavailable() == "network namespaces need root (the tests run as uid 1000)"


def test_without_ip_the_reason_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda name: None)
    reason = netns.unavailable()
    assert reason == "network namespaces need `ip` (iproute2), which is not installed"


def test_only_the_namespaces_of_dead_test_processes_are_stale() -> None:
    me = netns.os.getpid()
    listed = "\n".join(
        [
            "sa111-1-bridge",
            "sa111-1-db (id: 3)",
            "sa222-4-app",  # alive
            f"sa{me}-1-bridge",  # this process's own
            "sandbox-1-x",  # not ours: no sa<PID>-<N>- name
            "other",
        ]
    )
    stale = netns.stale_namespaces(listed, lambda pid: pid == 222)
    assert stale == ["sa111-1-bridge", "sa111-1-db"]
