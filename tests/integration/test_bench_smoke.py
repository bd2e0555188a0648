"""The benchmark harness works (tiny sizes): checks of the harness, not of the figures.

CI runs the smoke of the exact configuration (the benchmark the README's headline figure
comes from, at the smallest sizes) and the sink pass; the others are `slow`, run only with
-m slow (about 15 minutes between them, quixstreams' install from PyPI included): after
changing a benchmark, run them with `pytest -m slow tests/integration/test_bench_smoke.py`.
Whether every benchmark command still imports and answers --help is checked without
running it, in tests/unit/test_bench_layout.py.

One size where the full run loops over several (each app run costs about 20 s), but
two batch sizes for the sustained rate: at 400 lines alone it is below 0.01 of the
baseline, which the report rounds to 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)
ROOT = Path(__file__).resolve().parents[2]


def _smoke(tmp_path: Path, only: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--smoke", "--only", only,
         "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=580,
    )  # fmt: skip


@pytest.mark.slow
def test_bench_smoke_runs_and_reports_every_figure(tmp_path: Path) -> None:
    # The benchmarks of issue 18 have a test of their own (below), within the timeout.
    result = _smoke(tmp_path, "throughput,micro,checkpoint,state,peer,recovery")
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "results.json").read_text())
    throughput, recovery = figures["throughput"], figures["recovery"]
    assert throughput["baseline_words_per_s"] > 0
    tried = throughput["tried"]
    assert [t["batch_lines"] for t in tried] == [400, 800]
    assert all(t["batches"] >= 1 and t["words_per_s"] > 0 for t in tried)
    if tried[0]["keeps_up"]:  # tiny batches keep up, unless the machine is loaded
        assert throughput["sustained_words_per_s"] > 0 and throughput["ratio"] > 0
    assert len(recovery["first_batch_s"]) == recovery["runs"] == 1
    assert 0 < recovery["first_batch_median_s"] <= recovery["caught_up_median_s"]
    # Smoke runs only the app as it ships; both state layouts run in state_of_keys.
    assert [v["ratio"] > 0 for v in throughput["variants"]] == [True]
    assert throughput["baseline_python_crc_words_per_s"] > 0
    growth = figures["state_growth"]["1000"]
    assert growth["keys_at_end"] > 0 and len(growth["layouts"]) == 1
    keys = figures["state_of_keys"]
    assert keys["keys"] == 2000 and len(keys["variants"]) == 2
    for variant in keys["variants"]:
        assert variant["batches"] >= 1 and variant["processing_s"] > 0
        # Every process of the app was found and measured.
        assert min(variant[k] for k in ("driver_mib", "jvm_mib", "largest_worker_mib")) > 0
        assert variant["workers_together_mib"] > 0
    per_line = figures["per_line"]
    steps = ("baseline", "poll", "read", "read_count_old", "read_count")
    assert min(per_line[step] for step in steps) > 0
    assert per_line["broker_cpu"] >= 0  # the smoke's tansu is local: its CPU is found
    assert all(t["runs"] == 1 and len(t["runs_processing_s"]) == 1 for t in tried)
    # A checkpoint every 2 batches: the batches that wrote one are told from the others.
    cost = figures["checkpoint_cost"]["2"]
    assert cost["runs"] == 1 and cost["mean_processing_s"] > 0
    assert cost["written_s"] > 0 and cost["others_s"] > 0
    assert cost["extra_s"] == pytest.approx(cost["written_s"] - cost["others_s"], abs=0.002)
    assert cost["runs_within_loss_pct"] == [cost["within_loss_pct"]] != [None]
    peer = figures["peer"]
    assert peer["streaming_app"]["median_words_per_s"] > 0
    assert peer["structured"]["median_words_per_s"] > 0 and peer["ratio"] > 0
    for row in (
        "| **ratio app / baseline** |",
        "| **ratio streaming_app / Structured** |",
        "| + state in 64 buckets, a batch merged into it in one shuffle (the defaults now) |",
        "Python workers together",
        "**Per line, in one process**",
        "extra per checkpoint | loss within the run (each run) |",
    ):
        assert row in result.stdout, row  # fmt: skip


def test_bench_smoke_of_the_exact_configuration(tmp_path: Path) -> None:
    result = _smoke(tmp_path, "exact")
    assert result.returncode == 0, result.stderr[-3000:]
    exact = json.loads((tmp_path / "results.json").read_text())["exact"]
    assert exact["baseline_words_per_s"] > 0 and exact["checkpoint_batches"] == 2
    runs = {(r["batch_lines"], r["sinks"]) for r in exact["rows"]}
    assert runs == {(400, "files + console"), (400, "console alone")}
    for row in exact["rows"]:
        # Two steady batches, a whole checkpoint interval: one of them is aligned.
        assert row["batches"] >= 2 and row["mean_words_per_s"] > 0 and row["ratio"] > 0
        assert row["aligned_s"] > 0 and row["max_s"] >= row["processing_s"]
    for text in (
        "**Throughput in the exact configuration**",
        "| **streaming_app, files + console sinks, 400-line batches** |",
    ):
        assert text in result.stdout, text


@pytest.mark.slow  # `slow`: runs only with -m slow (the exact configuration's smoke is in CI)
def test_bench_smoke_of_the_cost_against_the_state(tmp_path: Path) -> None:
    result = _smoke(tmp_path, "cost-vs-state,million")
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "results.json").read_text())
    cost = figures["state_cost"]
    kinds = {(r["keys"], r["variant"]) for r in cost["rows"]}
    assert kinds == {(2000, "snapshots on"), (2000, "snapshots off")}
    for row in cost["rows"]:
        assert row["busy_batches"] >= 1 and row["busy_median_s"] > 0
        assert row["idle_batches"] >= 4 and row["idle_median_s"] > 0
        assert row["idle_aligned_s"] > 0  # 4 idle batches, a snapshot every 2
        assert min(row[k] for k in ("driver_mib", "jvm_mib", "aligned_driver_mib")) > 0
        assert row["aligned_workers_mib"] > 0 and row["others_jvm_mib"] > 0
    for text in (
        "| keys | idle batch | each run |",
        "**A state of 2,000 keys, files + console sinks**",
        "<!-- bench:million -->",
    ):
        assert text in result.stdout, text


@pytest.mark.slow
def test_the_long_memory_run_reports_each_process_kind(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "memory-run", "--minutes", "1", "--keys",
         "2000", "--batch-lines", "2000", "--every", "2", "--warmup-minutes", "0.25",
         "--gc-every", "15", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads((tmp_path / "memory_run.json").read_text())
    assert found["batches"] >= 5 and found["records"] > 0
    for field in ("driver_kb", "jvm_kb", "workers_kb", "heap_kb"):
        trend = found["trend"][field]
        assert trend["start_mib"] > 0 and trend["peak_mib"] >= trend["end_mib"] > 0
        assert trend["slope_mib_h"] is not None
    assert "| JVM (resident) |" in result.stdout
    assert "| JVM heap after a full GC (used) |" in result.stdout


def test_sink_pass_runs_both_paths_and_they_agree() -> None:
    # The script exits non-zero if the top 10 of every total and of the buckets' tops differ.
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "sink-pass",
            "--keys",
            "2000",
            "--repeats",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| state of 2,000 keys in 64 buckets |" in result.stdout
    assert "| top 10 of the buckets' tops (after) |" in result.stdout


@pytest.mark.slow
def test_bench_smoke_against_quixstreams(tmp_path: Path) -> None:
    # quixstreams' job runs in .venv-quix (made on first use); its totals are read back.
    result = _smoke(tmp_path, "quix")
    assert result.returncode == 0, result.stderr[-3000:]
    quix = json.loads((tmp_path / "results.json").read_text())["quix"]
    assert quix["app"]["words_per_s"] > 0 and quix["baseline_words_per_s"] > 0
    assert quix["quix_words"] == 2_000 * 10 and quix["quix_keys"] > 0
    assert [(v["guarantee"], v["instances"]) for v in quix["quix"]] == [
        ("at-least-once", 1), ("exactly-once", 1), ("exactly-once", 2), ("at-least-once", 1)
    ]  # fmt: skip
    for variant in quix["quix"]:
        assert variant["words_per_s"] > 0 and variant["start_s"] > 0
    # The three that send their totals on sent every word's; the fourth sends nothing.
    assert [v["exact"] for v in quix["quix"]] == [[True], [True], [True], [None]]
    assert "| quixstreams, exactly-once, totals to a topic, 2 instances |" in result.stdout


@pytest.mark.slow
def test_bench_smoke_of_the_cost_of_security_and_of_scraping(tmp_path: Path) -> None:
    # Both sides in the exact configuration, one run each; the secured one over TLS through
    # stunnel with a secret file, which must have turned Spark's protections on.
    from tests.integration.kafka_tls import stunnel_binary
    from tests.integration.pg_helpers import ci
    from tests.secrets_scan import find_secrets

    if stunnel_binary() is None:
        reason = "the security benchmark needs stunnel (Debian: stunnel4); .ci/run installs it"
        if ci():
            pytest.fail(reason)
        pytest.skip(reason)
    # With the cost of scraping (issue 40): the same exact configuration, two more runs.
    result = _smoke(tmp_path, "security,scrape")
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads((tmp_path / "results.json").read_text())
    security, scrape = found["security"], found["scrape"]
    assert [s["side"] for s in scrape["sides"]] == ["no endpoint", "scraped every 5 s"]
    for side in scrape["sides"]:
        assert side["runs_exact"] == [True] and side["mean_words_per_s"] > 0, side["side"]
    assert scrape["scrapes"] >= 2 and scrape["scrape_bytes"] > 1000  # it was scraped
    assert "| **scraped / no endpoint** |" in result.stdout
    assert [s["side"] for s in security["sides"]] == ["no protection", "every protection on"]
    for side in security["sides"]:
        assert side["runs_exact"] == [True], side["side"]  # corpus + backlog, each word once
        assert side["batches"] >= 2 and side["mean_words_per_s"] > 0 and side["aligned_s"] > 0
        assert 0 < side["restart_first_batch_s"] <= side["restart_caught_up_s"]
        assert side["ratio_words"] > 0 and side["ratio_restart_first_batch_s"] > 0
    assert security["sides"][1]["runs_cpu_s"][0] > 0  # stunnel was found and worked
    assert min(path["wall"] for path in security["paths_us"].values()) > 0
    # The secured run's SparkConf (Java-serialized in its checkpoint) has the protections,
    # and the secret itself in no file of that checkpoint.
    checkpoint = tmp_path / "security-secured-r1" / "checkpoint"
    settings = ("spark.authenticate", "spark.network.crypto.enabled",
                "spark.io.encryption.enabled", "spark.ui.killEnabled")  # fmt: skip
    first = min(checkpoint.glob("checkpoint-*"))
    found = {finding.rsplit("#", 1)[1] for finding in find_secrets([first], settings)}
    assert found == {str(n) for n in range(1, len(settings) + 1)}, first
    secret = (tmp_path / "spark-secret").read_text().strip()
    assert find_secrets([checkpoint], [secret]) == []
    for text in (
        "**The cost of security**",
        "| **every protection on / no protection** |",
        "**Where a secured Kafka read's time goes**",
    ):
        assert text in result.stdout, text


@pytest.mark.slow
def test_driver_cost_smoke(tmp_path: Path, pg_dsn: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "driver-cost", "--lines", "400",
         "--batches", "4", "--engines", "dstream", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=580,
        env={**os.environ, "TEST_POSTGRES_DSN": pg_dsn},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads((tmp_path / "driver_cost.json").read_text())
    assert {(r["engine"], r["sink"], r["keys"]) for r in found["rows"]} == {
        ("dstream", sink, keys) for sink in ("files", "postgres") for keys in ("~10k", "~490k")
    }
    assert all(r["driver_mib"] > 0 and r["driver_cpu_s"] > 0 for r in found["rows"])
    assert found["floor"]["seconds"] > 0 and "| dstream | postgres |" in result.stdout


@pytest.mark.slow
def test_scale_out_smoke_runs_every_side_and_accounts_their_cpu(
    _netns_ready: None, tmp_path: Path
) -> None:
    # Issue 58's scale-out: a cluster of namespace hosts, the app on 1 and 2 one-core
    # workers and plain Python in 1 and 2 processes, each process's CPU from /proc.
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "scale-out", "--smoke", "--sinks",
         "files", "--runs", "1", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=580,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads((tmp_path / "scale_out.json").read_text())["files"]
    assert sorted(found) == ["app-1", "app-2", "plain-1", "plain-2"]
    for side in ("app-1", "app-2"):
        run = found[side][0]
        assert run["batches"] >= 1 and run["words_per_s"] > 0, side
        # the executors' and the driver's processes were found on their hosts
        assert run["cpu_s"]["Python workers"] > 0 and run["cpu_s"]["driver JVM"] > 0, side
        assert run["timeline"], side  # Spark's event log was read
    for side in ("plain-1", "plain-2"):
        assert found[side][0]["words_per_s"] > 0 and found[side][0]["cpu_s"]["plain Python"] > 0
    assert "gain 2/1" in result.stdout


@pytest.mark.slow
def test_latency_smoke_sees_every_probe_in_each_sink(tmp_path: Path) -> None:
    # Issue 58's end-to-end latency: probes through the DStream engine, and through Spark's
    # own word count (the peer), to a reader of the files sink and of the postgres sink
    # (the server at 127.0.0.1:5432; the peer upserting from foreachBatch).
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "latency", "--smoke", "--engines",
         "dstream,peer", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=580,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert sorted((row["engine"], row["sink"]) for row in rows) == [
        ("dstream", "files"),
        ("dstream", "postgres"),
        ("peer", "files"),
        ("peer", "postgres"),
    ]
    for row in rows:
        assert row["probes"] > 0, row
        assert 0 < row["p50_s"] <= row["p99_s"] <= row["max_s"], row


@pytest.mark.slow
def test_warmup_smoke_accounts_each_window_by_process_and_jvm_thread(tmp_path: Path) -> None:
    # Issue 58's first minute: the CPU of each window, the driver's, the Python workers'
    # and the JVM's thread groups apart, and the batches each window completed.
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "warmup", "--smoke", "--workdir",
         str(tmp_path)],
        capture_output=True, text=True, timeout=580,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    windows = json.loads((tmp_path / "results.json").read_text())["windows"]
    groups = {group for window in windows for group in window["cpu_s"]}
    assert {"driver (Python)", "Python workers", "JVM: task threads"} <= groups, groups
    assert sum(window["lines"] for window in windows) >= 2_000 * 20 // 2
    assert all(window["total_cpu_s"] > 0 for window in windows if window["batches"]), windows
    assert "| window | batches | median batch |" in result.stdout
