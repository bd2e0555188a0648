"""The benchmarks' one entry point: the suite of docs/benchmarks.md, or one benchmark alone.

    python bench/run.py [--smoke] [--only NAME,...] [--update-docs]
    python bench/run.py COMMAND [its options; --help]    (the commands: COMMANDS below)

Everything runs here, on loopback: a Kafka-protocol broker (tansu, or KAFKA_BOOTSTRAP),
the app as a subprocess in local[2] mode, the baseline in this process. Figures are
medians of repeated runs, measured side by side in one invocation; see docs/benchmarks.md.
This module runs the benchmarks (each in a module of its own), records results.json and
writes the report. `--only` runs some of them; `--update-docs` then replaces only their
blocks of docs/benchmarks.md (bench/harness/docs.py). A command runs one benchmark that is
no part of the suite, or one of the suite's with options of its own (their modules' mains).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.costs.scrape import SCRAPE_LINES, scrape_cost, scrape_report
from bench.costs.security import SECURITY_LINES, security_cost
from bench.costs.security_report import security_report
from bench.harness.corpus import broker
from bench.harness.docs import block, update_docs
from bench.harness.results import machine, make_workdir, write_json
from bench.peers.peer import peer, peer_report
from bench.peers.quix import QUIX_LINES, quix_bench, quix_report
from bench.state.recovery import recovery, recovery_report
from bench.state.state_cost import (
    MILLION,
    NO_SNAPSHOTS,
    SNAPSHOTS,
    STATE_KEYS,
    cost_vs_state_report,
    million_report,
    state_cost,
)
from bench.state.state_size import LAYOUTS, state_growth, state_of_keys, state_report
from bench.throughput.checkpoint import CHECKPOINT_BATCHES, checkpoint_cost, checkpoint_report
from bench.throughput.exact import EXACT_SIZES, HEADLINE_LINES, exact_report, exact_throughput
from bench.throughput.micro import micro, micro_report, per_line, per_line_report
from bench.throughput.throughput import BATCH_SIZES, OPTIMIZATIONS, throughput, throughput_report

# The benchmarks run alone, each with options of its own: command -> module (its main()).
COMMANDS = {
    "checkpoint": "bench.throughput.checkpoint",
    "compare": "bench.compare_cli",
    "driver-cost": "bench.costs.driver_cost",
    "engines": "bench.peers.engines",
    "lag": "bench.costs.lag_read",
    "latency": "bench.latency.latency",
    "memory-run": "bench.state.memory_run",
    "peer": "bench.peers.peer",
    "profile": "bench.throughput.profile_run",
    "rule-cost": "bench.costs.rule_cost",
    "scale-out": "bench.scale.scale_out",
    "sink-pass": "bench.throughput.sink_pass",
    "small-state": "bench.throughput.small_state",
    "structured-floor": "bench.peers.structured_floor",
    "warmup": "bench.throughput.warmup",
}

# Every benchmark, in the order of the report; a full run runs them all.
BENCHMARKS = ("exact", "throughput", "micro", "checkpoint", "state", "cost-vs-state",
              "million", "peer", "recovery", "quix", "security", "scrape")  # fmt: skip

SMOKE: dict[str, Any] = dict(lines=2_000, batch_lines=400, runs=1, kills=1, backlog=500, keys=2_000,
             key_lines=1_000, files=1, file_lines=500, rounds=2, app_runs=1,
             checkpoint_runs=1, exact_sizes=(400,), exact_headline=400,
             state_keys=(2_000,), million=2_000, every=2, busy=4, idle=4,
             cost_runs=1, quix_lines=2_000, security_lines=400, security_runs=1,
             scrape_lines=400, scrape_runs=1)  # fmt: skip
FULL: dict[str, Any] = dict(lines=200_000, batch_lines=20_000, runs=5, kills=5, backlog=50_000,
            keys=1_000_000, key_lines=100_000, files=2, file_lines=10_000, rounds=6,
            app_runs=3, checkpoint_runs=3, exact_sizes=EXACT_SIZES,
            exact_headline=HEADLINE_LINES, state_keys=STATE_KEYS, million=MILLION,
            every=10, busy=12, idle=12, cost_runs=2, quix_lines=QUIX_LINES,
            security_lines=SECURITY_LINES, security_runs=5, scrape_lines=SCRAPE_LINES,
            scrape_runs=5)  # fmt: skip


def measure(names: list[str], smoke: bool, sizes: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Run the named benchmarks; their entries of results.json."""
    lines, batch_lines = sizes["lines"], sizes["batch_lines"]
    found: dict[str, Any] = {}
    with broker(workdir) as bootstrap:
        if "exact" in names:
            found["exact"] = exact_throughput(
                workdir, bootstrap, sizes["exact_sizes"], sizes["app_runs"], lines, sizes["runs"],
                sizes["exact_headline"], sizes["every"],
            )  # fmt: skip
        if "throughput" in names:
            found["runs"] = sizes["runs"]
            found["throughput"] = throughput(
                workdir, bootstrap, lines, batch_lines, sizes["runs"],
                OPTIMIZATIONS[-1:] if smoke else OPTIMIZATIONS,
                (400, 800) if smoke else BATCH_SIZES, sizes["app_runs"],
            )  # fmt: skip
        if "checkpoint" in names:
            found["checkpoint_lines"] = 3 * lines
            found["checkpoint_cost"] = checkpoint_cost(
                workdir, bootstrap, 3 * lines, batch_lines,
                (2,) if smoke else CHECKPOINT_BATCHES, sizes["checkpoint_runs"],
            )  # fmt: skip
        if "state" in names:
            found["state_growth"] = state_growth(
                workdir, bootstrap, lines, batch_lines,
                (1_000,) if smoke else (10_000, 100_000, 1_000_000),
                LAYOUTS[-1:] if smoke else LAYOUTS,
            )  # fmt: skip
            found["state_of_keys"] = state_of_keys(
                workdir, bootstrap, sizes["keys"], sizes["key_lines"], batch_lines, LAYOUTS
            )
        plan = cost_plan(names, sizes)
        if plan:
            found["state_cost"] = state_cost(
                workdir, bootstrap, plan, sizes["cost_runs"], batch_lines, sizes["busy"],
                sizes["idle"], sizes["every"],
            )  # fmt: skip
        if "peer" in names:
            found["peer"] = peer(workdir, sizes["files"], sizes["file_lines"], sizes["rounds"])
        if "micro" in names:
            found["micro"] = micro(bootstrap, batch_lines, 3 if smoke else 9)
            found["micro_lines"] = batch_lines
            found["per_line"] = per_line(bootstrap, lines // 2, 3 if smoke else 7)
            found["per_line_lines"] = lines // 2
        if "recovery" in names:
            found["recovery"] = recovery(workdir, bootstrap, sizes["kills"], sizes["backlog"])
        if "quix" in names:
            found["quix"] = quix_bench(
                workdir, bootstrap, sizes["quix_lines"], sizes["app_runs"],
                sizes["exact_headline"], sizes["every"], lines,
            )  # fmt: skip
        if "security" in names:
            found["security"] = security_cost(
                workdir, sizes["security_lines"], sizes["security_runs"],
                sizes["every"], parts=not smoke, read_lines=lines, read_repeats=sizes["runs"],
            )  # fmt: skip
        if "scrape" in names:
            found["scrape"] = scrape_cost(
                workdir, sizes["scrape_lines"], sizes["scrape_runs"], sizes["every"]
            )
    return found


def cost_plan(names: list[str], sizes: dict[str, Any]) -> list[tuple[int, str]]:
    """The (keys, variant) runs of bench/state/state_cost.py that the named benchmarks need."""
    plan = []
    if "cost-vs-state" in names:
        plan += [(keys, SNAPSHOTS) for keys in sizes["state_keys"]]
    if "million" in names:
        plan += [(sizes["million"], SNAPSHOTS), (sizes["million"], NO_SNAPSHOTS)]
    return list(dict.fromkeys(plan))


REPORTS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "exact": lambda r: exact_report(r["exact"]),
    "throughput": lambda r: throughput_report(r["throughput"], r["runs"]),
    "micro": lambda r: [*micro_report(r["micro"], r["micro_lines"]), "",
                        *per_line_report(r["per_line"], r["per_line_lines"])],
    "checkpoint": lambda r: checkpoint_report(r["checkpoint_cost"], r["checkpoint_lines"]),
    "state": lambda r: state_report(r["state_growth"], r["state_of_keys"]),
    "cost-vs-state": lambda r: cost_vs_state_report(r["state_cost"]),
    "million": lambda r: million_report(r["state_cost"]),
    "peer": lambda r: peer_report(r["peer"]),
    "recovery": lambda r: recovery_report(r["recovery"]),
    "quix": lambda r: quix_report(r["quix"]),
    "security": lambda r: security_report(r["security"], r.get("exact")),
    "scrape": lambda r: scrape_report(r["scrape"]),
}  # fmt: skip


def provenance(results: dict[str, Any]) -> str:
    """Where and how the figures were measured."""
    m = results["machine"]
    return (
        f"Measured {results['date']} with `{results['command']}` on {m['cpu']}; Python "
        f"{m['python']}, PySpark {m['pyspark']}, {m['java']}; broker: {m['broker']}."
    )


def blocks(results: dict[str, Any], names: list[str], each_dated: bool) -> dict[str, str]:
    """Each named benchmark's tables, between its markers; `each_dated`: each block says
    where it was measured (a block replaced alone outlives the others' date line)."""
    return {
        name: block(name, [*([provenance(results), ""] if each_dated else []),
                           *REPORTS[name](results)])
        for name in names
    }  # fmt: skip


def report(results: dict[str, Any], names: list[str]) -> str:
    """The results section of docs/benchmarks.md."""
    return "\n\n".join([provenance(results), *blocks(results, names, False).values()])


def selected(only: str | None) -> list[str]:
    """The benchmarks to run, in the order of the report; exits on an unknown name."""
    if not only:
        return list(BENCHMARKS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"error: unknown benchmark {', '.join(unknown)}; "
                         f"known: {', '.join(BENCHMARKS)}")  # fmt: skip
    return [n for n in BENCHMARKS if n in names]


def run_command(argv: list[str]) -> None:
    """One benchmark alone: its module's main() parses the rest of the command line (its
    usage reads `run.py COMMAND`)."""
    name, *rest = argv
    sys.argv = [f"run.py {name}", *rest]
    importlib.import_module(COMMANDS[name]).main()


def main() -> None:
    """Run the benchmarks and print (and optionally record) the figures."""
    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        run_command(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="commands (each with --help):\n  " + "\n  ".join(COMMANDS),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # a command a line, unbroken
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness")
    known = ", ".join(BENCHMARKS)
    parser.add_argument("--only", metavar="NAME,...", help=f"run only these, of: {known}")
    parser.add_argument("--update-docs", action="store_true", help="write docs/benchmarks.md")
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    names = selected(options.only)
    workdir = make_workdir(options.workdir, "streaming-app-bench-")
    command = "python bench/run.py" + (" --smoke" if options.smoke else "")
    command += f" --only {','.join(names)}" if options.only else ""
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "machine": machine(),
        **measure(names, options.smoke, SMOKE if options.smoke else FULL, workdir),
    }
    write_json(workdir / "results.json", results)
    section = report(results, names)
    print(section)
    print(f"\n(logs, metrics and results.json in {workdir})", file=sys.stderr)
    if options.update_docs:
        if options.only:
            update_docs(blocks=blocks(results, names, True))
        else:
            update_docs(section=section)


if __name__ == "__main__":
    main()
