"""Benchmarks of streaming_app: throughput against a single-process baseline, and recovery.

    python bench/run.py [--smoke] [--update-docs]

Everything runs here, on loopback: a Kafka-protocol broker (tansu, or KAFKA_BOOTSTRAP),
the app as a subprocess in local[2] mode, the baseline in this process. Figures are
medians of repeated runs, measured side by side in one invocation; see docs/benchmarks.md.
This module runs the benchmarks (each in a module of its own), records results.json and
writes the report.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checkpoint import CHECKPOINT_BATCHES, checkpoint_cost, checkpoint_report
from bench.harness import broker, machine, write_json
from bench.micro import micro, micro_report, per_line, per_line_report
from bench.peer import peer, peer_report
from bench.recovery import recovery, recovery_report
from bench.state_size import LAYOUTS, state_growth, state_of_keys, state_report
from bench.throughput import BATCH_SIZES, OPTIMIZATIONS, throughput, throughput_report

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def report(results: dict[str, Any]) -> str:
    """The results section of docs/benchmarks.md."""
    m = results["machine"]
    return "\n".join(
        [
            f"Measured {results['date']} with `{results['command']}` on {m['cpu']}; Python "
            f"{m['python']}, PySpark {m['pyspark']}, {m['java']}; broker: {m['broker']}.",
            "",
            *throughput_report(results["throughput"], results["runs"]),
            "",
            *micro_report(results["micro"], results["micro_lines"]),
            "",
            *per_line_report(results["per_line"], results["per_line_lines"]),
            "",
            *checkpoint_report(results["checkpoint_cost"], results["checkpoint_lines"]),
            "",
            *state_report(results["state_growth"], results["state_of_keys"]),
            "",
            *peer_report(results["peer"]),
            "",
            *recovery_report(results["recovery"]),
        ]
    )


def update_docs(section: str) -> None:
    """Replace the text between the results markers of docs/benchmarks.md."""
    text = DOCS.read_text()
    new, found = re.subn(
        r"(<!-- results -->\n).*?(\n<!-- /results -->)",
        lambda match: match.group(1) + section + match.group(2),
        text,
        flags=re.S,
    )
    if not found:
        raise SystemExit(f"{DOCS} has no <!-- results --> markers")
    DOCS.write_text(new)


def main() -> None:
    """Run the benchmarks and print (and optionally record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness")
    parser.add_argument("--update-docs", action="store_true", help="write docs/benchmarks.md")
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    sizes = dict(lines=2_000, batch_lines=400, runs=1, kills=1, backlog=500, keys=2_000,
                 key_lines=1_000, files=1, file_lines=500, rounds=2, app_runs=1,
                 checkpoint_runs=1)  # fmt: skip
    if not options.smoke:
        sizes = dict(lines=200_000, batch_lines=20_000, runs=5, kills=5, backlog=50_000,
                     keys=1_000_000, key_lines=100_000, files=2, file_lines=10_000,
                     rounds=6, app_runs=3, checkpoint_runs=3)  # fmt: skip
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="streaming-app-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    command = "python bench/run.py" + (" --smoke" if options.smoke else "")
    lines, batch_lines = sizes["lines"], sizes["batch_lines"]
    with broker(workdir) as bootstrap:
        results = {
            "date": time.strftime("%Y-%m-%d"),
            "command": command,
            "runs": sizes["runs"],
            "machine": machine(),
            "throughput": throughput(
                workdir, bootstrap, lines, batch_lines, sizes["runs"],
                OPTIMIZATIONS[-1:] if options.smoke else OPTIMIZATIONS,
                (400, 800) if options.smoke else BATCH_SIZES, sizes["app_runs"],
            ),
            "checkpoint_lines": 3 * lines,
            "checkpoint_cost": checkpoint_cost(
                workdir, bootstrap, 3 * lines, batch_lines,
                (2,) if options.smoke else CHECKPOINT_BATCHES, sizes["checkpoint_runs"],
            ),
            "state_growth": state_growth(
                workdir, bootstrap, lines, batch_lines,
                (1_000,) if options.smoke else (10_000, 100_000, 1_000_000),
                LAYOUTS[-1:] if options.smoke else LAYOUTS,
            ),
            "state_of_keys": state_of_keys(
                workdir, bootstrap, sizes["keys"], sizes["key_lines"], batch_lines, LAYOUTS
            ),
            "peer": peer(workdir, sizes["files"], sizes["file_lines"], sizes["rounds"]),
            "micro": micro(bootstrap, batch_lines, 3 if options.smoke else 9),
            "micro_lines": batch_lines,
            "per_line": per_line(bootstrap, lines // 2, 3 if options.smoke else 7),
            "per_line_lines": lines // 2,
            "recovery": recovery(workdir, bootstrap, sizes["kills"], sizes["backlog"]),
        }  # fmt: skip
    write_json(workdir / "results.json", results)
    section = report(results)
    print(section)
    print(f"\n(logs, metrics and results.json in {workdir})", file=sys.stderr)
    if options.update_docs:
        update_docs(section)


if __name__ == "__main__":
    main()
