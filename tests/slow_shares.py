"""The `slow` tests in shares of about equal time, one share run by each CI run.

The whole set of `slow` tests takes about two hours on CI's two cores, far past CI's
45-minute aim; the `not slow` suite holds a test of every guarantee
(docs/guarantees.md). So `.ci/run` adds one share of the slow tests, `--slow-share K/N`,
with K the number of commits of main modulo N: over any N consecutive commits every slow
test runs once. Shares are filled greedily, longest first, from the durations below
(seconds on the slowest CI machine seen, docs/development.md); a slow test missing here
counts as DEFAULT_SECONDS and fails tests/unit/test_slow_shares.py until it is added.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

SHARES = 10
DEFAULT_SECONDS = 180

# Node id (without the tests/integration/ prefix) -> seconds, as measured in CI runs on
# the slowest machine (5036512, f170241) or, where the docs give no figure, the nearest
# kin's. They only balance the shares: a wrong figure costs balance, not coverage.
SECONDS: dict[str, int] = {
    "test_bench_smoke.py::test_bench_smoke_runs_and_reports_every_figure": 240,
    "test_bench_smoke.py::test_bench_smoke_of_the_exact_configuration_and_the_cost_against_the_state": 180,
    "test_bench_smoke.py::test_the_long_memory_run_reports_each_process_kind": 150,
    "test_bench_smoke.py::test_bench_smoke_against_quixstreams": 150,
    "test_bench_smoke.py::test_bench_smoke_of_the_cost_of_security_and_of_scraping": 180,
    "test_bench_smoke.py::test_driver_cost_smoke": 120,
    "test_cluster_partition.py::test_workers_and_the_driver_cut_off_while_records_arrive[as-reported]": 390,
    "test_cluster_partition.py::test_workers_and_the_driver_cut_off_while_records_arrive[short]": 330,
    "test_engine_move.py::test_dstreams_to_structured_and_back_exact_in_files_and_postgres": 210,
    "test_intruder.py::test_a_host_without_the_secret_gets_nothing_while_the_app_counts_exactly[structured]": 120,
    "test_kafka_chaos.py::test_kill_9_twenty_five_times_while_producing_exact_totals": 720,
    "test_kafka_partition.py::test_the_apps_link_cut_while_records_arrive[150s]": 210,
    "test_kafka_partition.py::test_a_cut_longer_than_kafka_give_up_after_ends_the_run_and_supervise_resumes_it[still-cut-at-the-restart]": 125,
    "test_postgres_partition.py::test_a_cut_between_commits_is_retried_and_exact[sink-defaults]": 100,
    "test_prometheus_alerts.py::test_the_falling_behind_alert_fires_while_the_input_outruns_the_app_and_resolves_after[structured]": 180,
    "test_prometheus_alerts.py::test_a_frozen_jvm_pages_and_fails_healthz_where_a_healthy_start_paged_nothing[structured]": 120,
    "test_prometheus_alerts.py::test_a_postgres_server_that_stops_answering_pages_and_the_totals_stay_exact": 150,
    "test_prometheus_quiet.py::test_a_healthy_app_pages_nothing_idle_input_idle_stop_and_start[dstream]": 600,
    "test_prometheus_quiet.py::test_a_healthy_app_pages_nothing_idle_input_idle_stop_and_start[structured]": 600,
    "test_prometheus_server.py::test_prometheus_scrapes_the_app_and_the_down_alert_fires_and_clears_under_supervise[structured]": 120,
    "test_recovery.py::test_kill_9_twice_then_totals_equal_ground_truth": 210,
    "test_structured_chaos.py::test_kill_9_four_times_while_producing_exact_totals": 330,
    "test_structured_chaos.py::test_kill_9_twenty_five_times_while_producing_exact_totals": 960,
    "test_structured_snapshots.py::test_dstream_snapshot_restored_into_a_structured_query_while_producing": 150,
    "test_supervise.py::test_supervise_restarts_a_killed_driver_and_totals_stay_exact[structured]": 120,
    "test_upgrade_from_releases.py::test_a_releases_checkpoint_is_refused_then_carried_over_exactly[0.3.0]": 90,
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
    """Each node id's share, 0..shares-1: longest first into the share with the least time
    so far (ties by a stable hash of the id, then the lowest share), so the same set of
    tests always gives the same shares on every machine and xdist worker."""
    if shares < 1:
        raise ValueError(f"shares must be at least 1, not {shares}")
    totals = [0] * shares
    found: dict[str, int] = {}
    ordered = sorted(set(node_ids), key=lambda n: (-seconds_of(n), zlib.crc32(n.encode()), n))
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
