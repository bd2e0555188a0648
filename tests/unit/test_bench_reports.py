"""The benchmarks' reports and their place in docs/benchmarks.md (pure functions, no runs)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.harness.docs import block, with_blocks, with_results
from bench.run import FULL, cost_plan, selected
from bench.state.memory_run import memory_run_report
from bench.state.state_cost import NO_SNAPSHOTS, SNAPSHOTS, cost_vs_state_report, million_report
from bench.throughput.exact import CONSOLE, EXACT, exact_report

PAGE = """# Benchmarks

<!-- results -->
Measured then.

<!-- bench:exact -->
old exact
<!-- /bench:exact -->

<!-- bench:throughput -->
old throughput
<!-- /bench:throughput -->
<!-- /results -->

## Where the time goes
"""


def test_a_run_of_some_benchmarks_replaces_only_their_blocks() -> None:
    new = with_blocks(PAGE, {"exact": block("exact", ["new exact", r"a \d in a table"])})
    assert "new exact\na \\d in a table\n<!-- /bench:exact -->" in new
    assert "old exact" not in new and "old throughput" in new and "Measured then." in new
    # A block the page does not have yet goes at the end of the results.
    added = with_blocks(PAGE, {"million": block("million", ["a million"])})
    assert added.index("old throughput") < added.index("a million") < added.index("/results")
    assert added.endswith("## Where the time goes\n")


def test_a_full_run_replaces_the_whole_results_section() -> None:
    page = PAGE.replace("old exact", "old exact $1 \\1")  # no replacement template here
    new = with_results(page, "Measured now.\n\n" + block("exact", ["x"]))
    assert "Measured then." not in new and "old exact" not in new
    assert new.count("<!-- results -->") == new.count("<!-- /results -->") == 1
    # A block that the run does not write (the long memory run's) stays.
    assert "old throughput" in new and new.index("x\n") < new.index("old throughput")
    with pytest.raises(SystemExit):
        with_results("no markers", "x")


def test_only_selects_benchmarks_by_name_in_report_order() -> None:
    assert selected("million, exact") == ["exact", "million"]
    assert selected(None)[0] == "exact"  # the exact configuration is the headline
    with pytest.raises(SystemExit, match="unknown benchmark nope"):
        selected("exact,nope")


def test_cost_against_state_and_a_million_keys_share_their_runs() -> None:
    plan = cost_plan(["cost-vs-state", "million"], FULL)
    assert plan == [(10_000, SNAPSHOTS), (100_000, SNAPSHOTS), (1_000_000, SNAPSHOTS),
                    (1_000_000, NO_SNAPSHOTS)]  # fmt: skip
    assert cost_plan(["exact"], FULL) == []


def _exact_row(lines: int, sinks: str, side: str, words: int, kept: int = 3) -> dict[str, Any]:
    return {"batch_lines": lines, "sinks": sinks, "side": side, "mean_words_per_s": words,
            "runs_mean_words_per_s": [words] * 3, "ratio": round(words / 500_000, 2),
            "processing_s": 1.0, "mean_processing_s": 1.1, "aligned_s": 1.5,
            "checkpoint_s": None, "max_s": 1.6, "runs_kept_up": kept, "runs": 3,
            "keeps_up": kept >= 2}  # fmt: skip


def test_the_exact_headline_names_the_sinks_and_the_batch_size() -> None:
    rows = [_exact_row(20_000, EXACT, "", 300_000), _exact_row(60_000, EXACT, "", 800_000),
            _exact_row(200_000, EXACT, "", 900_000, kept=1),
            _exact_row(60_000, CONSOLE, "", 950_000)]  # fmt: skip
    found = {"headline_lines": 60_000, "checkpoint_batches": 10, "rows": rows,
             "baseline_words_per_s": 500_000, "baseline_runs": 5, "baseline_s": 4.0,
             "baseline_lines": 200_000,
             "sustained": {"": {"batch_lines": 60_000, "words_per_s": 300_000,
                                "ratio": 0.6}}}  # fmt: skip
    text = "\n".join(exact_report(found))
    assert "`--sink files --sink console`" in text and "**60,000-line batches**" in text
    assert (
        "| **streaming_app, files + console sinks, 60,000-line batches** | **800,000** | "
        "**1.6** | target ≥ 1.5; each run: 800,000, 800,000, 800,000 |" in text
    )
    assert (
        "| streaming_app, console sink alone (not exact), 60,000-line batches | 950,000 |" in text
    )
    assert "| files + console | 200,000 | 900,000 |" in text and "| 1 of 3 | no |" in text
    # The exact sizes come first, the console alone last; a missing kind is a dash.
    assert text.index("| files + console | 20,000") < text.index("| console alone | 60,000")
    assert "| 1.5 s | — | 1.6 s |" in text
    assert "Counters merged" not in text  # a run from before the two-process ceiling
    found |= {"two_process_words_per_s": 900_000, "two_process_s": 2.22}
    text = "\n".join(exact_report(found))
    assert (
        "(what the cores give plain Python, without Spark) | 900,000 | 1.8 | "
        "median of 5 runs: 2.22 s for 200,000 lines |" in text
    )


def _cost_row(keys: int, variant: str, side: str, idle: float) -> dict[str, Any]:
    figures = {f"{kind}_{what}": value for kind in ("idle", "busy")
               for what, value in (("median_s", idle), ("aligned_s", 2 * idle),
                                   ("checkpoint_s", None), ("max_s", 3 * idle))}  # fmt: skip
    return {"keys": keys, "variant": variant, "side": side, "runs": 2, **figures,
            "runs_idle_median_s": [idle, idle], "runs_busy_median_s": [idle, idle],
            "driver_mib": 300, "aligned_driver_mib": 290, "others_driver_mib": 120,
            "jvm_mib": 700, "aligned_jvm_mib": 650, "largest_worker_mib": 100,
            "workers_together_mib": 250, "aligned_workers_mib": 240}  # fmt: skip


def test_the_cost_table_has_a_row_per_state_size_and_side() -> None:
    rows = [_cost_row(k, SNAPSHOTS, side, 0.25 if side == "after" else 1.0)
            for k in (1_000_000, 10_000) for side in ("before (abc)", "after")]  # fmt: skip
    rows.append(_cost_row(1_000_000, NO_SNAPSHOTS, "after", 0.1))
    found = {"batch_lines": 20_000, "busy_batches": 12, "idle_batches": 12,
             "checkpoint_batches": 10, "rows": rows}  # fmt: skip
    text = "\n".join(cost_vs_state_report(found))
    assert "| keys | revision | idle batch |" in text
    assert text.index("| 10,000 | after |") < text.index("| 1,000,000 | after |")
    assert "| 1,000,000 | after | 0.25 s | 0.25 s, 0.25 s | 0.5 s | — | 0.75 s |" in text
    assert text.index("| 1,000,000 | before (abc) |") < text.index("| 1,000,000 | after |")
    assert "snapshots off" not in text  # the cost table is the exact configuration's
    million = "\n".join(million_report(found))
    assert "**A state of 1,000,000 keys, files + console sinks**" in million
    assert "(target ≤ 1.0 s)" in million and "(target ≤ 0.3 s)" in million
    assert "| snapshots off, after | 0.1 s | 0.1 s | 0.2 s; 0.2 s |" in million
    assert "| 300 MiB | 290 MiB | 120 MiB | 700 MiB | 650 MiB |" in million
    # The snapshot's cost: the aligned idle batches with snapshots on against off.
    assert "0.5 s with snapshots on and 0.2 s with them off (+0.300 s)" in million
    assert million.index("| snapshots on, after |") < million.index("| snapshots off, after |")


def test_the_long_run_reports_each_process_kind_and_its_slope() -> None:
    trend = {"start_mib": 300, "end_mib": 310, "peak_mib": 330, "slope_mib_h": -1.5,
             "late_slope_mib_h": 0.0}  # fmt: skip
    found = {"minutes": 30.0, "every_s": 10.0, "keys": 1_000_000, "batch_lines": 10_000,
             "checkpoint_batches": 10, "warm_after_s": 120.0, "batches": 840,
             "records": 8_400_000, "processing_s": 0.8, "max_processing_s": 1.9,
             "last_scheduling_delay_s": 0.0, "worker_processes": [3, 3],
             "trend": {f: trend for f in ("driver_kb", "jvm_kb", "workers_kb")}}  # fmt: skip
    text = "\n".join(memory_run_report(found))
    assert "heap after a full GC" not in text.split("\n", 2)[2]  # a run without heap samples
    found["trend"]["heap_kb"] = {**trend, "start_mib": 200}
    text = "\n".join(memory_run_report(found))
    assert "| JVM heap after a full GC (used) | 200 MiB | 310 MiB |" in text
    assert "`python bench/run.py memory-run --minutes 30`" in text and "5,000 lines/s" in text
    assert (
        "| driver (Python, resident) | 300 MiB | 310 MiB | 330 MiB | -1.5 MiB/h | +0.0 MiB/h |"
        in text
    )
    assert "Python worker processes: 3 to 3." in text


def test_the_two_engines_table_names_each_engine_and_the_idle_cost() -> None:
    from bench.peers.engines import engines_report

    def row(lines: int, engine: str, words: int, idle: float | None) -> dict[str, Any]:
        return {"batch_lines": lines, "engine": engine, "mean_words_per_s": words,
                "ratio": round(words / 1_000_000, 2), "processing_s": 0.5, "idle_s": idle,
                "runs": 2, "runs_mean_words_per_s": [words, words]}  # fmt: skip

    restart = {"first_batch_median_s": 9.1, "first_batch_s": [9.0, 9.1, 9.3],
               "caught_up_median_s": 12.0}  # fmt: skip
    found = {"baseline_words_per_s": 1_000_000, "baseline_lines": 200_000,
             "rows": [row(60_000, "structured", 700_000, None),
                      row(60_000, "dstream", 1_100_000, 0.2)],
             "recovery": {"dstream": restart, "structured": {**restart,
                          "first_batch_median_s": 25.0}}}  # fmt: skip
    found["rows"].append(row(60_000, "groupBy(word).count()", 900_000, None))
    found["rows"].insert(
        0, row(60_000, "the same, with the DStream jobs' tokenizer", 800_000, None)
    )
    found["recovery"]["groupBy(word).count()"] = {**restart, "first_batch_median_s": 15.0}
    text = "\n".join(engines_report(found))
    assert "did 1,000,000 words/s in the same invocation" in text
    # The floor beside the engines: Spark's own word count, named with how it read Kafka.
    assert "groupBy(word).count(): Spark's own word count" in text
    assert "| 60,000 | groupBy(word).count() | 900,000 | 0.9 | 0.5 s | none runs |" in text
    assert "| groupBy(word).count() | 15.0 s | 9.0, 9.1, 9.3 | 12.0 s |" in text
    # The engines first, then the peers, each after the one it varies.
    rows = [line.split(" | ")[1] for line in text.splitlines() if line.startswith("| 60,000 |")]
    assert rows == [
        "dstream",
        "structured",
        "groupBy(word).count()",
        "the same, with the DStream jobs' tokenizer",
    ]
    assert "| 60,000 | dstream | 1,100,000 | 1.1 | 0.5 s | 0.2 s | 1,100,000, 1,100,000 |" in text
    assert "| 60,000 | structured | 700,000 | 0.7 | 0.5 s | none runs |" in text
    assert text.index("| 60,000 | dstream |") < text.index("| 60,000 | structured |")
    assert "| structured | 25.0 s | 9.0, 9.1, 9.3 | 12.0 s |" in text


def test_the_two_engines_on_files_table_names_each_engine_and_each_restart() -> None:
    from bench.peers.engines import files_report

    def engine(words: int, idle: float | None, restarts: list[float]) -> dict[str, Any]:
        return {"median_words_per_s": words, "ratio": round(words / 5_000_000, 3),
                "median_processing_s": round(600_000 / words, 3),
                "mean_processing_s": round(660_000 / words, 3), "batches": [1, 1, 2],
                "idle_s": idle, "first_batch_s": restarts,
                "first_batch_median_s": sorted(restarts)[1]}  # fmt: skip

    found = {"rounds": 3, "files_per_round": 2, "round_lines": 60_000,
             "baseline_words_per_s": 5_000_000, "restarts": 3,
             "engines": {"dstream": engine(800_000, 0.3, [7.0, 7.5, 8.0]),
                         "structured": engine(120_000, None, [25.0, 27.5, 30.0]),
                         "groupBy(word).count()": {"median_words_per_s": 400_000,
                                                   "ratio": 0.08, "median_processing_s": 1.5,
                                                   "mean_processing_s": 1.6,
                                                   "batches": [1, 1, 1]}}}  # fmt: skip
    text = "\n".join(files_report(found))
    assert "3 rounds of 2 files, 60,000 lines" in text
    assert "medians over the 2 rounds after the first" in text
    assert "did 5,000,000 words/s in the same invocation" in text
    assert (
        "| dstream | 800,000 | 0.16 | 0.75 s | 0.825 s | 1, 1, 2 | 0.3 s | 7.5 s | 7.0, 7.5, 8.0 |"
        in text
    )
    assert "| structured | 120,000 | 0.024 | 5.0 s | 5.5 s | 1, 1, 2 | none runs | 27.5 s |" in text
    # A peer without restarts measured: dashes, not a crash on the missing figures.
    assert (
        "| groupBy(word).count() | 400,000 | 0.08 | 1.5 s | 1.6 s | 1, 1, 1 | none runs | — | — |"
        in text
    )
    found["engines"]["groupBy(word).count()"].update(first_batch_s=[9.0, 9.5, 9.9],
                                                     first_batch_median_s=9.5)  # fmt: skip
    text = "\n".join(files_report(found))
    assert "| 1, 1, 1 | none runs | 9.5 s | 9.0, 9.5, 9.9 |" in text


def test_issue_29s_measures_are_each_systems_figure_over_the_dstream_engines() -> None:
    from bench.peers.engines import targets_report

    peer = "groupBy(word).count()"
    found = {
        "rows": [{"batch_lines": 20_000, "engine": "dstream", "processing_s": 0.5},
                 {"batch_lines": 20_000, "engine": "structured", "processing_s": 1.1},
                 {"batch_lines": 20_000, "engine": peer, "processing_s": 0.8}],
        "recovery": {"dstream": {"first_batch_median_s": 6.0},
                     "structured": {"first_batch_median_s": 13.2},
                     peer: {"first_batch_median_s": 9.0}},
        "files": {"engines": {
            "dstream": {"median_processing_s": 0.5, "first_batch_median_s": 7.0},
            "structured": {"median_processing_s": 1.8, "first_batch_median_s": 11.2},
            peer: {"median_processing_s": 0.9},  # no restarts measured
            "the same, with the DStream jobs' tokenizer": {"median_processing_s": 1.2},
        }},
        "million": {"keys": 1_000_000, "variants": [
            {"variant": "dstream", "processing_s": 0.64},
            {"variant": "structured", "processing_s": 1.2},
            {"variant": peer, "processing_s": 1.1}]},
    }  # fmt: skip
    text = "\n".join(targets_report(found))
    assert (
        "| Kafka, a batch of 20,000 lines | 0.5 s | 1.1 s | 0.8 s | 2.20x | 1.60x | ≤ 1.5x |"
        in text
    )
    assert (
        "| Kafka, restart after kill -9 | 6.0 s | 13.2 s | 9.0 s | 2.20x | 1.50x | ≤ 1.25x |"
        in text
    )
    assert "| files, a round (median) | 0.5 s | 1.8 s | 0.9 s | 3.60x | 1.80x |" in text
    assert "| files, restart after kill -9 | 7.0 s | 11.2 s | — | 1.60x | — | ≤ 1.25x |" in text
    # The peer counting the engine's words in the peer's column, where it was measured.
    assert (
        "| files, a round (median); groupBy(word).count() with the DStream jobs' tokenizer | "
        "0.5 s | 1.8 s | 1.2 s | 3.60x | 2.40x |  |" in text
    )
    assert "Kafka, a batch of 20,000 lines; groupBy" not in text
    assert "| 1,000,000 keys, a batch of 20,000 lines | 0.64 s | 1.2 s | 1.1 s |" in text
    assert text.count("| ≤ 1.0 s |") == 1


def test_restart_figures_are_each_restart_and_their_medians() -> None:
    from bench.state.recovery import recovery_figures

    found = recovery_figures(20_000, [13.04, 12.96, 15.5], [15.12, 14.0, 16.0])
    assert found == {
        "runs": 3, "backlog_lines": 20_000,
        "first_batch_s": [13.0, 13.0, 15.5], "first_batch_median_s": 13.0,
        "caught_up_s": [15.1, 14.0, 16.0], "caught_up_median_s": 15.1,
    }  # fmt: skip


def test_the_quixstreams_table_has_the_app_the_baseline_and_each_variant() -> None:
    from bench.peers.quix import VARIANTS, quix_report

    variants = [
        {"label": label, "guarantee": guarantee, "instances": instances,
         "words_per_s": 10_000 + i, "runs_words_per_s": [10_000 + i], "start_s": 7.5,
         "ratio": 0.01, "exact": [True] if output else [None]}
        for i, (label, guarantee, instances, output) in enumerate(VARIANTS)
    ]  # fmt: skip
    lines = quix_report({
        "baseline_words_per_s": 1_000_000, "headline_lines": 60_000, "checkpoint_batches": 10,
        "app": {"words_per_s": 900_000, "runs_words_per_s": [900_000], "ratio": 0.9},
        "quix_lines": 50_000, "quix_words": 500_000, "quix_keys": 40_000, "quix": variants,
    })  # fmt: skip
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[1].startswith("| baseline: one kafka-python consumer + `Counter` | 1,000,000 |")
    assert rows[2].startswith(
        "| **streaming_app, files + console sinks, 60,000-line batches** | **900,000** | **0.9** |"
    )
    assert rows[3].startswith(
        "| quixstreams, at-least-once (its default), totals to a topic | 10,000 |"
    )
    assert "| yes (1 of 1 runs) |" in rows[3]
    assert rows[6].startswith("| quixstreams, at-least-once, no output")
    assert "| — (no output) |" in rows[6]
    assert len(rows) == 3 + len(VARIANTS)


def _security_side(side: str, words: int, cpu: float | None, ratio: float) -> dict[str, Any]:
    return {
        "side": side, "mean_words_per_s": words, "runs_mean_words_per_s": [words, words],
        "processing_s": 0.6, "runs_processing_s": [0.6, 0.6], "aligned_s": 0.8,
        "checkpoint_s": None, "app_cpu_s": 9.5, "runs_app_cpu_s": [9.5, 9.5],
        "restart_first_batch_s": 8.0, "runs_restart_first_batch_s": [8.0, 8.0],
        "restart_caught_up_s": 11.0, "runs_restart_caught_up_s": [11.0, 11.0],
        "runs_exact": [True, True], "runs": 2, "runs_cpu_s": [cpu, cpu],
        "ratio_words": ratio, "ratio_processing": ratio, "ratio_app_cpu_s": ratio,
        "ratio_restart_first_batch_s": 1.05, "ratio_restart_caught_up_s": 1.1,
    }  # fmt: skip


def _path(wall: float, forwarder: float) -> dict[str, float]:
    return {"wall": wall, "client_cpu": 8.0, "forwarder_cpu": forwarder}


def test_the_security_table_has_each_side_its_ratio_and_the_target() -> None:
    from bench.costs.security import PLAIN, SECURED, SPARK_ONLY
    from bench.costs.security_paths import HOP, STRAIGHT, TLS
    from bench.costs.security_report import security_report

    found = {
        "batch_lines": 60_000, "checkpoint_batches": 10, "rounds": 2, "state_keys": 99_000,
        "tls": "stunnel 5.68, the client's OpenSSL 3.0.22",
        "sides": [_security_side(PLAIN, 900_000, None, 1.0),
                  _security_side(SPARK_ONLY, 850_000, None, 1.06),
                  _security_side(SECURED, 600_000, 1.5, 1.5)],
        "paths_us": {STRAIGHT: _path(10.0, 0), HOP: _path(11.0, 1.5), TLS: _path(13.0, 2.5)},
        "paths_lines": 200_000, "connect_repeats": 20,
        "connect_ms": {STRAIGHT: _path(6.7, 0), TLS: _path(20.6, 5.0)},
        "paths_repeats": 5,
    }  # fmt: skip
    text = "\n".join(security_report(found))
    assert "the state growing to 99,000 keys, the distinct words of the corpus (780,000" in text
    assert "tansu behind stunnel 5.68, the client's OpenSSL 3.0.22." in text
    assert "| **every protection on** | 600,000 (600,000, 600,000) | 0.6 s (0.6, 0.6) |" in text
    assert "| 8.0 s (8.0, 8.0) | 11.0 s (11.0, 11.0) | 2 of 2 |" in text
    assert "| Spark's protections alone (plain Kafka) / no protection | 1.06 " in text
    assert "| **every protection on / no protection** | **1.5** " in text
    assert "**not met** (1.5 on a 60,000-line batch, 1.05 on a restart" in text
    assert "stunnel, the extra process on the secured path, used 1.5 s of CPU" in text
    assert "| straight to tansu | 10.0 | 1.0 | 8.0 | — |" in text
    assert "| over TLS (stunnel), client certificate | 13.0 | 1.3 | 8.0 | 2.5 |" in text
    assert "The hop costs 1.0 µs a line, the encryption (client and stunnel) 2.0 µs" in text
    assert "as each batch does for each partition; medians of 20, ms):" in text
    assert "| straight to tansu | 6.7 | 8.0 | — |" in text
    assert "| over TLS (stunnel) | 20.6 | 8.0 | 5.0 |" in text
    found["sides"][2].update(ratio_words=1.1)
    del found["paths_us"][HOP]
    text = "\n".join(security_report(found))
    assert "**met** (1.1 on a 60,000-line batch" in text
    assert "The plain hop was not measured: socat is not installed." in text


def test_the_scrape_table_has_both_sides_the_scrapes_and_the_target() -> None:
    from bench.costs.scrape import OFF, SCRAPED, scrape_report

    found = {
        "batch_lines": 60_000, "checkpoint_batches": 10, "rounds": 2, "state_keys": 99_000,
        "interval_s": 5.0, "scrapes": 240, "scrape_bytes": 9_600, "scrape_ms": 7.5,
        "sides": [_security_side(OFF, 900_000, None, 1.0),
                  _security_side(SCRAPED, 890_000, None, 1.01)],
    }  # fmt: skip
    text = "\n".join(scrape_report(found))
    assert (
        "fetched every 5 s by a client on this machine (240 scrapes answered, 9,600 bytes" in text
    )
    assert "| **scraped every 5 s** | 890,000 (890,000, 890,000) | 0.6 s (0.6, 0.6) |" in text
    assert "| **scraped / no endpoint** | **1.01** " in text
    assert "costs at most 2% of a 60,000-line batch: **met** (1.01 on words/s" in text
    found["sides"][1].update(ratio_words=1.05)
    assert "**not met** (1.05" in "\n".join(scrape_report(found))
    found["sides"][1].update(ratio_words=1.0)
    found["scrapes"] = 0  # never scraped: no figure to meet the target with
    assert "**not met**" in "\n".join(scrape_report(found))


def test_the_structured_floor_report_puts_the_app_over_each_peer() -> None:
    from bench.peers.structured_floor import floor_report

    def run(median: float, rate: int) -> dict[str, Any]:
        return {
            "processing_s": median, "runs_processing_s": [median, median + 0.1],
            "mean_words_per_s": rate, "runs_mean_words_per_s": [rate, rate - 1000],
        }  # fmt: skip

    found = {"app": run(1.0, 500_000), "noop": run(0.8, 700_000), "output": run(1.1, 495_000)}
    rows = floor_report(found)
    app, noop, output = rows[2:]
    assert app.startswith("| the app, ") and app.endswith("| 1 |")
    assert "| 0.8 s | 0.8, 0.9 | 700,000 | 700,000, 699,000 | 1.25x, 1.40x |" in noop
    assert output.endswith("| 0.91x, 0.99x |")
