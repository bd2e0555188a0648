"""A change's before and after: the app at a git revision against this checkout, side by side.

    python bench/run.py compare REV [--sizes 20000,140000] [--rounds 3] [--workdir DIR]
    python bench/run.py compare REV --keys 1000000 [--rounds 2]

Exports REV with `git archive` into the work directory, loads one topic as the
throughput benchmark does, and runs the app from REV and from this checkout on it, once
per batch size and side, `--rounds` rounds interleaved (REV, this, REV, this, ...); per
size, the median processing time of a batch on each side and whether each side keeps
up (as bench/throughput/throughput.py decides it). The throughput benchmark's baseline
(kafka-python and `Counter` in one process, median of 5 runs over 200,000 lines) runs on
the same topic, so each side's sustained rate has its ratio to it. Both sides use this
virtualenv's packages. Prints Markdown for docs/benchmarks.md.

With --keys N, the topic is bench/state/state_size.py's state of N keys instead (every key once,
then 100,000 Zipf lines over them, in batches of 20,000 lines), and the figures are
those of the batches after the state is full: what a change does to a large state.

With --exact, --cost-vs-state or --million the sides run bench/throughput/exact.py's and
bench/state/state_cost.py's measures instead, in the exact configuration (files + console
sinks), and it prints their tables with a row per side:

    python bench/run.py compare REV --exact [--sizes 20000,60000,200000] [--rounds 3]
        [--no-console] [--warmup-batches N] [--env-side LABEL:VAR=VALUE[,VAR=VALUE...]]...
    python bench/run.py compare REV --cost-vs-state [10000,100000,1000000] [--million]

With --exact, --warmup-batches N has every run read N batches that are not measured
before its usual 2 warm-up batches (how the app does once its JIT has settled), and each
--env-side adds a side: this checkout's code with that environment added (such as
`"Java's default JIT:STREAMING_APP_JVM_C1=0"`), interleaved with the others in each round.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S
from bench.harness.corpus import WORDS_PER_LINE, baseline_seconds, broker, load_topic
from bench.harness.rates import interleaved, runner
from bench.harness.results import median, write_json
from bench.run import cost_plan
from bench.state.state_cost import cost_vs_state_report, million_report, state_cost
from bench.state.state_size import key_topic
from bench.throughput.exact import exact_report, exact_throughput
from bench.throughput.throughput import SUSTAINED_RUN_BATCHES, size_keeps_up, sustained_lines

ROOT = Path(__file__).resolve().parent.parent

SIDES = ("before", "after")
BASELINE_LINES = 200_000
BASELINE_RUNS = 5


def export(rev: str, into: Path) -> Path:
    """The repository at `rev`, as files (no .git), in `into`/code."""
    code = into / "code"
    code.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"error: git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True)
    # The app must come from the export, not from the checkout installed in the venv.
    where = subprocess.run(
        [sys.executable, "-c", "import streaming_app; print(streaming_app.__file__)"],
        cwd=code, env={"PYTHONPATH": str(code)}, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not where.startswith(str(code)):
        raise SystemExit(f"error: the exported app does not come first on the path ({where})")
    return code


def compare(workdir: Path, rev: str, sizes: list[int], rounds: int) -> dict[str, Any]:
    """Per batch size both sides' figures (medians over the rounds); the baseline."""
    code = export(rev, workdir / "rev")
    with broker(workdir) as bootstrap:
        topic = load_topic(bootstrap, max(BASELINE_LINES, max(sizes) * SUSTAINED_RUN_BATCHES))
        baseline = median(
            [baseline_seconds(bootstrap, topic, BASELINE_LINES) for _ in range(BASELINE_RUNS)]
        )
        runs = {
            (size, side): runner(
                workdir, f"{side}-{size}", bootstrap, topic, size * SUSTAINED_RUN_BATCHES,
                size, "--checkpoint-interval", "20", code=code if side == "before" else None,
            )
            for size in sizes for side in SIDES
        }  # fmt: skip
        found = interleaved(rounds, runs)
    rows = [{"batch_lines": size, **{side: found[size, side] for side in SIDES}} for size in sizes]
    return {"baseline_words_per_s": BASELINE_LINES * WORDS_PER_LINE / baseline, "rows": rows}


KEY_LINES = 100_000
KEY_BATCH_LINES = 20_000


def compare_keys(workdir: Path, rev: str, keys: int, rounds: int) -> dict[str, Any]:
    """Both sides on a state of `keys` keys: the figures of the batches after it is full."""
    code = export(rev, workdir / "rev")
    with broker(workdir) as bootstrap:
        topic, loading = key_topic(bootstrap, keys, KEY_LINES)
        return interleaved(rounds, {
            side: runner(
                workdir, f"{side}-keys", bootstrap, topic, loading + KEY_LINES, KEY_BATCH_LINES,
                "--checkpoint-interval", "20", skip_lines=loading,
                code=code if side == "before" else None,
            )
            for side in SIDES
        })  # fmt: skip


def keys_table(rev: str, keys: int, found: dict[str, Any]) -> str:
    """The state-of-keys comparison as Markdown."""
    before, after = found["before"], found["after"]
    return "\n".join([
        f"| a state of {keys:,} keys | processing of a batch of {KEY_BATCH_LINES:,} lines "
        "| each run | words/s of processing |",
        "|---|---|---|---|",
        *[
            f"| {side}{f' ({rev})' if side == 'before' else ''} | {f['processing_s']} s | "
            + ", ".join(f"{s} s" for s in f["runs_processing_s"])
            + f" | {f['words_per_s']:,} |"
            for side, f in (("before", before), ("after", after))
        ],
        f"| after / before | {after['processing_s'] / before['processing_s']:.2f} | | |",
    ])  # fmt: skip


def sustained(rows: list[dict[str, Any]], side: str) -> int:
    """Words/s of one side's sustained batch size, as bench/throughput/throughput.py decides it."""
    tried = [{"batch_lines": r["batch_lines"], "keeps_up": size_keeps_up(r[side])} for r in rows]
    return sustained_lines(tried) * WORDS_PER_LINE // BATCH_S


def table(rev: str, found: dict[str, Any]) -> str:
    """The comparison as Markdown."""
    rows, base = found["rows"], found["baseline_words_per_s"]
    lines = [
        f"| lines per batch | before ({rev}) | each run | after | each run | after / before "
        "| kept up, before | kept up, after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        before, after = row["before"], row["after"]
        lines.append(
            f"| {row['batch_lines']:,} | {before['processing_s']} s "
            f"| {', '.join(f'{s} s' for s in before['runs_processing_s'])} "
            f"| {after['processing_s']} s "
            f"| {', '.join(f'{s} s' for s in after['runs_processing_s'])} "
            f"| {after['processing_s'] / before['processing_s']:.2f} "
            f"| {before['runs_kept_up']} of {before['runs']} "
            f"| {after['runs_kept_up']} of {after['runs']} |"
        )
    lines += ["", "| | words/s | ratio to the baseline |", "|---|---|---|"]
    lines.append(f"| baseline, median of {BASELINE_RUNS} runs | {base:,.0f} | |")
    for side in SIDES:
        rate = sustained(rows, side)
        lines.append(f"| {side}, sustained (of the sizes tried) | {rate:,} | {rate / base:.2f} |")
    return "\n".join(lines)


def cpu_table(rows: list[dict[str, Any]]) -> list[str]:
    """The app's CPU per 1000 lines, per row of bench/throughput/exact.py's figures."""
    lines = [
        "| sinks | lines per batch | side | CPU per 1000 lines (median) | each run |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        each = ", ".join(f"{c} ms" for c in r["runs_cpu_ms_per_kline"])
        lines.append(
            f"| {r['sinks']} | {r['batch_lines']:,} | {r['side']} | "
            f"{r['cpu_ms_per_kline']} ms | {each} |"
        )
    return lines


def side_labels(rev: str) -> tuple[str, str]:
    """The labels of compare_exact's two sides: REV's code and this checkout's."""
    return f"before ({rev})", "after"


def compare_exact(
    workdir: Path,
    rev: str,
    names: list[str],
    sizes: dict[str, Any],
    rounds: int,
    console: bool = True,
    warmup: int = 0,
    env_sides: tuple[tuple[str, dict[str, str]], ...] = (),
) -> list[str]:
    """Both sides in the exact configuration, for the named benchmarks of bench/run.py
    (exact, cost-vs-state, million) at its `sizes` (FULL or SMOKE, or as told); the
    console sink alone beside it unless not `console`. The exact throughput only: each
    run reads `warmup` unmeasured batches first, and each of `env_sides` (a label, more
    environment) is a side more, this checkout's code with that environment."""
    code = export(rev, workdir / "rev")
    before, after = side_labels(rev)
    sides = ((before, code), (after, None))
    exact_sides = (*sides, *((label, None, env) for label, env in env_sides))
    plan = cost_plan(names, sizes)
    found: dict[str, Any] = {}
    lines: list[str] = []
    with broker(workdir) as bootstrap:
        if "exact" in names:
            found["exact"] = exact_throughput(
                workdir, bootstrap, sizes["exact_sizes"], rounds, sizes["lines"], sizes["runs"],
                sizes["exact_headline"], sizes["every"], sides=exact_sides, console=console,
                warmup=warmup,
            )  # fmt: skip
            lines += [*exact_report(found["exact"]), "", *cpu_table(found["exact"]["rows"])]
        if plan:
            cost = state_cost(
                workdir, bootstrap, plan, rounds, sizes["batch_lines"], sizes["busy"],
                sizes["idle"], sizes["every"], sides=sides,
            )  # fmt: skip
            found["state_cost"] = cost
            lines += ["", *cost_vs_state_report(cost)] if "cost-vs-state" in names else []
            lines += ["", *million_report(cost)] if "million" in names else []
    write_json(workdir / "compare.json", found)
    return lines
