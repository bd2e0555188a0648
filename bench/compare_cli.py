"""`bench/run.py compare`'s options: bench/compare.py says what each comparison measures.

python bench/run.py compare REV [--sizes 20000,140000] [--rounds 3] [--workdir DIR]
python bench/run.py compare REV --keys 1000000 [--rounds 2]
python bench/run.py compare REV --exact [--sizes 20000,60000,200000] [--rounds 3]
    [--no-console] [--warmup-batches N] [--env-side LABEL:VAR=VALUE[,VAR=VALUE...]]...
python bench/run.py compare REV --cost-vs-state [10000,100000,1000000] [--million]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import bench.compare
from bench.compare import (
    compare,
    compare_exact,
    compare_keys,
    keys_table,
    side_labels,
    table,
)
from bench.harness.env_side import env_side
from bench.harness.results import make_workdir
from bench.run import FULL, SMOKE
from streaming_app.common.jvm_archive import ENV as ARCHIVE_ENV


def warmup_batches(text: str) -> int:
    """--warmup-batches: a whole number of batches, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of batches, 0 or more")
    return int(text)


def main() -> None:
    """Compare and print."""
    parser = argparse.ArgumentParser(description=(bench.compare.__doc__ or "").split("\n\n")[0])
    parser.add_argument("rev", help="the git revision to compare this checkout with")
    parser.add_argument(
        "--sizes",
        help="lines per batch, commas [20000,140000; --exact: bench/throughput/exact.py's]",
    )
    parser.add_argument("--keys", type=int, help="compare on a state of this many keys")
    parser.add_argument(
        "--exact",
        action="store_true",
        help="the throughput in the exact configuration (bench/throughput/exact.py)",
    )
    parser.add_argument(
        "--cost-vs-state",
        nargs="?",
        metavar="KEYS,...",
        const="default",
        help="the cost against the state size (bench/state/state_cost.py) [10000,100000,1000000]",
    )
    parser.add_argument(
        "--million", action="store_true", help="1M keys, snapshots on and off (state_cost.py)"
    )
    parser.add_argument(
        "--no-console",
        action="store_true",
        help="with --exact: no run of the console sink alone beside the exact configuration",
    )
    parser.add_argument(
        "--warmup-batches",
        type=warmup_batches,
        default=0,
        metavar="N",
        help="with --exact: every run first reads N batches that are not measured [0]",
    )
    parser.add_argument(
        "--env-side",
        type=env_side,
        action="append",
        default=[],
        metavar="LABEL:VAR=VALUE[,VAR=VALUE...]",
        help="with --exact: a side more, this checkout with that environment (repeatable)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes (with --exact, --cost-vs-state, --million): checks the harness",
    )
    parser.add_argument("--workdir", type=Path)
    options = parser.parse_args()
    exact_only = [("--warmup-batches", options.warmup_batches), ("--env-side", options.env_side)]
    for option, given in exact_only:
        if given and not options.exact:
            parser.error(f"{option}: only with --exact")
    labels = [*side_labels(options.rev), *(label for label, _ in options.env_side)]
    for label in labels:
        if labels.count(label) > 1:
            parser.error(f"argument --env-side: the label {label!r} names two sides")
    # Both sides start their JVMs without the class archive: a revision before it has none.
    os.environ[ARCHIVE_ENV] = "0"
    workdir = make_workdir(options.workdir, "streaming-app-compare-")
    if options.exact or options.cost_vs_state or options.million:
        told = dict(SMOKE if options.smoke else FULL)
        if options.sizes:
            told["exact_sizes"] = tuple(int(s) for s in options.sizes.split(","))
        if options.cost_vs_state and options.cost_vs_state != "default":
            told["state_keys"] = tuple(int(k) for k in options.cost_vs_state.split(","))
        names = [
            name
            for name, wanted in (
                ("exact", options.exact),
                ("cost-vs-state", options.cost_vs_state),
                ("million", options.million),
            )
            if wanted
        ]
        report = compare_exact(
            workdir, options.rev, names, told, options.rounds, not options.no_console,
            options.warmup_batches, tuple(options.env_side),
        )  # fmt: skip
        print("\n".join(report))
    elif options.keys:
        found = compare_keys(workdir, options.rev, options.keys, options.rounds)
        print(keys_table(options.rev, options.keys, found))
    else:
        sizes = [int(s) for s in (options.sizes or "20000,140000").split(",")]
        print(table(options.rev, compare(workdir, options.rev, sizes, options.rounds)))
    print(f"\n(logs and metrics in {workdir})", file=sys.stderr)
