"""The cost of security's tables for docs/benchmarks.md, from bench/costs/security.py's figures."""

from __future__ import annotations

from typing import Any

from bench.costs.security import SECURED, TARGET
from bench.costs.security_paths import paths_report
from bench.harness.results import median
from bench.harness.side_runs import each_run, seconds_cell, side_row, words_cell


def security_report(s: dict[str, Any], exact: dict[str, Any] | None = None) -> list[str]:
    """The cost of security's tables for docs/benchmarks.md; `exact`: bench/throughput/exact.py's
    figures of the same invocation, whose headline the plain side reruns."""
    size, every, rounds = s["batch_lines"], s["checkpoint_batches"], s["rounds"]
    lines = [
        f"**The cost of security** (the exact configuration: Kafka source, `local[2]`, 2 s "
        f"batches of **{size:,} lines** of 10 words over a Zipf vocabulary of 100k words, "
        "`--sink files --sink console`, a state checkpoint and a snapshot every "
        f"{every} batches, the state growing to {s['state_keys']:,} keys, the distinct words "
        f"of the corpus ({size * (every + 3):,} lines) and the backlog. Every "
        "protection on: `--spark-secret-file` (`spark.authenticate`, "
        "`spark.network.crypto.enabled` without SASL fallback, `spark.io.encryption.enabled`, "
        "`spark.ui.killEnabled=false`) and Kafka over TLS with a client certificate and an "
        "encrypted key (`security_protocol = ssl`, `ssl_cafile`, `ssl_certfile`, "
        f"`ssl_keyfile`, `ssl_password` from the environment), tansu behind {s['tls']}. "
        "Words/s "
        f"of processing over {every} steady batches; then `kill -9` past a state checkpoint "
        f"and a restart with {size:,} lines waiting: seconds from the start to the first "
        "completed batch and to the backlog read; exact: the files sink's totals equal the "
        f"corpus's and the backlog's. CPU: the app's processes' CPU seconds (driver, JVM, "
        "Python workers, from `/proc`) over its batches after the first two, a measure the "
        f"machine's other load disturbs less. Medians of {rounds} runs of each side, "
        "alternated, each round starting with the next side; each run in brackets):",
        "",
        "| | words/s of processing | processing of a batch | aligned batches | batches "
        "that wrote Spark's checkpoint | CPU | restart to the first batch | restart to the "
        "backlog read | exact |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    seconds = ("app_cpu_s", "restart_first_batch_s", "restart_caught_up_s")
    for r in s["sides"]:
        cells = [
            words_cell(r), seconds_cell(r, "processing_s"), _cell(r["aligned_s"]),
            _cell(r["checkpoint_s"]), *(seconds_cell(r, f) for f in seconds),
        ]  # fmt: skip
        lines.append(side_row(r, cells, SECURED))
    for r in s["sides"][1:]:
        bold = "**" if r["side"] == SECURED else ""
        lines.append(
            f"| {bold}{r['side']} / no protection{bold} | {bold}{r['ratio_words']}{bold} "
            f"(plain's words/s over these) | {r['ratio_processing']} | | | "
            f"{r['ratio_app_cpu_s']} | {r['ratio_restart_first_batch_s']} | "
            f"{r['ratio_restart_caught_up_s']} | |"
        )
    secured = next(r for r in s["sides"] if r["side"] == SECURED)
    worst = max(secured["ratio_words"], secured["ratio_restart_first_batch_s"])
    lines += [
        "",
        f"Target: every protection on costs at most {TARGET} times: "
        f"**{'met' if worst <= TARGET else 'not met'}** ({secured['ratio_words']} on a "
        f"{size:,}-line batch, {secured['ratio_restart_first_batch_s']} on a restart to its "
        "first batch).",
    ]
    cpu = [c for c in secured["runs_cpu_s"] if c is not None]
    if cpu:
        lines += [
            "",
            f"stunnel, the extra process on the secured path, used {median(cpu)} s of CPU "
            f"while the app read the corpus ({size * (every + 3):,} lines; each run: "
            f"{each_run(cpu)} s), on the same two cores.",
        ]
    paths = paths_report(
        s["paths_us"], s["paths_lines"], s["paths_repeats"], s.get("connect_ms"),
        s.get("connect_repeats", 0),
    )  # fmt: skip
    lines += ["", *paths]
    if exact:
        headline = [
            r for r in exact["rows"]
            if r["batch_lines"] == exact["headline_lines"] and r["sinks"] == "files + console"
        ]  # fmt: skip
        if headline:
            lines += [
                "",
                "bench/throughput/exact.py's own run in this invocation "
                f"({exact['headline_lines']:,}-line "
                f"batches, no protection): {headline[0]['mean_words_per_s']:,} words/s, "
                f"{headline[0]['processing_s']} s a batch.",
            ]
    return lines


def _cell(value: Any) -> str:
    return "—" if value is None else f"{value} s"
