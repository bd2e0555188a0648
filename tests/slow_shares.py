"""The `slow` tests in shares of about equal time, one share run by each CI run.

The whole set of `slow` tests takes about two hours on CI's two cores, far past CI's
45-minute aim; the `not slow` suite holds a test of every guarantee
(docs/guarantees.md). So `.ci/run` adds one share of the slow tests, `--slow-share K/N`,
with K the number of commits of main modulo N: over any N consecutive commits every slow
test runs once. Shares are filled greedily, longest first, from the durations in
tests/slow_seconds.txt (seconds on the slowest CI machine seen); a slow test missing here
counts as DEFAULT_SECONDS and fails tests/unit/test_slow_shares.py until it is added.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path

SHARES = 12
DEFAULT_SECONDS = 180

SECONDS: dict[str, int] = {
    name: int(seconds)
    for seconds, name in (
        line.split(maxsplit=1)
        for line in (Path(__file__).parent / "slow_seconds.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
}


# Slow tests no share takes, each with why: CI runs them never, `-m slow` does.
NOT_ROTATED: dict[str, str] = {
    # Longer than a share (about 35 minutes each): run with its own command, as
    # docs/development.md says, before a release and when the rules change.
    "test_prometheus_idle.py::test_a_healthy_app_idle_for_30_minutes_under_30_s_scrapes_"
    "pages_nothing[dstream]": "35 minutes, more than a share's 10-16: its own command",
    "test_prometheus_idle.py::test_a_healthy_app_idle_for_30_minutes_under_30_s_scrapes_"
    "pages_nothing[structured]": "35 minutes, more than a share's 10-16: its own command",
}


def short_id(node_id: str) -> str:
    """A node id without the tests/integration/ (or tests/) prefix, as SECONDS keys it."""
    for prefix in ("tests/integration/", "tests/"):
        if node_id.startswith(prefix):
            return node_id[len(prefix) :]
    return node_id


def seconds_of(node_id: str) -> int:
    return SECONDS.get(short_id(node_id), DEFAULT_SECONDS)


def assign(node_ids: Iterable[str], shares: int = SHARES) -> dict[str, int]:
    """Each node id's share, 0..shares-1 (none for those NOT_ROTATED): longest first into
    the share with the least time so far (ties by a stable hash of the id, then the
    lowest share), so the same set of tests gives the same shares on every machine and
    xdist worker."""
    if shares < 1:
        raise ValueError(f"shares must be at least 1, not {shares}")
    totals = [0] * shares
    found: dict[str, int] = {}
    rotated = {n for n in node_ids if short_id(n) not in NOT_ROTATED}
    ordered = sorted(rotated, key=lambda n: (-seconds_of(n), zlib.crc32(n.encode()), n))
    for node_id in ordered:
        share = min(range(shares), key=lambda s: (totals[s], s))
        found[node_id] = share
        totals[share] += seconds_of(node_id)
    return found


def parse_share(text: str) -> tuple[int, int]:
    """`K/N` -> (K, N), with 0 <= K < N; a ValueError that says what is wrong otherwise."""
    head, sep, tail = text.partition("/")
    if not sep or not head.strip().isdigit() or not tail.strip().isdigit():
        raise ValueError(f"--slow-share must be K/N (share K of N, from 0), not {text!r}")
    k, n = int(head), int(tail)
    if n < 1 or k >= n:
        raise ValueError(f"--slow-share {text!r}: K must be 0..N-1 and N at least 1")
    return k, n
