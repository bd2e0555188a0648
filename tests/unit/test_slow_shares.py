"""The slow tests' shares: every slow test in exactly one, shares of about equal time."""

from __future__ import annotations

import pytest

from tests import ledger, slow_shares


def test_every_slow_test_has_its_seconds_and_no_other_test_does() -> None:
    slow = {slow_shares.short_id(node_id) for node_id in ledger.collected("slow")}
    assert slow, "no slow test collected"
    listed = set(slow_shares.SECONDS) | set(slow_shares.NOT_ROTATED)
    assert slow - listed == set(), "add them to tests/slow_seconds.txt"
    assert listed - slow == set(), "not slow tests: remove them there"


def test_each_test_is_in_one_share_and_shares_are_balanced() -> None:
    ids = [f"tests/integration/{name}" for name in slow_shares.SECONDS]
    shares = slow_shares.assign(ids)
    assert set(shares) == set(ids) and set(shares.values()) <= set(range(slow_shares.SHARES))
    flaky = [f"tests/integration/{name}" for name in slow_shares.NOT_ROTATED]
    assert slow_shares.assign([*ids, *flaky]) == shares  # in no share
    totals = [0] * slow_shares.SHARES
    for node_id, share in shares.items():
        totals[share] += slow_shares.seconds_of(node_id)
    longest = max(slow_shares.SECONDS.values())
    fair = sum(totals) / slow_shares.SHARES
    # Greedy longest-first: no share passes the fair share by more than one test's time.
    assert max(totals) <= max(longest, fair + max(sorted(slow_shares.SECONDS.values())[:-1]))
    assert slow_shares.assign(reversed(ids)) == shares  # the same on every worker


@pytest.mark.parametrize("text", ["3", "3/", "/10", "10/10", "-1/10", "a/b", "0/0"])
def test_a_wrong_share_is_refused_with_the_form_it_takes(text: str) -> None:
    with pytest.raises(ValueError, match="K"):
        slow_shares.parse_share(text)


def test_the_option_marks_exactly_the_share_it_names_and_runs_it_first() -> None:
    """--slow-share K/N through pytest itself: `-m 'not slow or ci_share'` (CI's) collects
    that share's slow tests and no other, first and longest first (a share's long test
    started last would run alone at the end of CI's two processes)."""
    ids = sorted(ledger.collected("slow"))
    shares = slow_shares.assign(ids)
    ids = [node_id for node_id in ids if node_id in shares]  # not those NOT_ROTATED
    k = max(range(slow_shares.SHARES), key=lambda s: sum(1 for v in shares.values() if v == s))
    share = {node_id for node_id in ids if shares[node_id] == k}
    order = ledger.collected_in_order(
        ["--slow-share", f"{k}/{slow_shares.SHARES}"], "not slow or ci_share"
    )
    assert {node_id for node_id in order if node_id in shares} == share
    assert len(order) > len(share) > 1
    assert set(order[: len(share)]) == share
    seconds = [slow_shares.seconds_of(node_id) for node_id in order[: len(share)]]
    assert seconds == sorted(seconds, reverse=True)
