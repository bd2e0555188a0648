"""Runs the ledger's controls: each patch must turn its tests red, and the tree without it green.

For each control (docs/guarantees.md names it and the CI tests that must catch it):
1. copy the work tree (a shared clone of HEAD, then the tracked and untracked files as
   they are, not ignored ones) to a scratch folder,
   so the CLI the tests start and Spark's Python workers import the changed code too
   (PYTHONPATH points at the copy);
2. apply the patch there (`git apply`);
3. run the row's tests as CI runs them (`-m 'not slow'`, one process) in the copy: they
   must fail (pytest exit code 1);
4. run the same tests in an unchanged copy: they must pass (exit code 0).
The run passes only if every control chosen did both. `scripts/controls.sh` calls it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests import ledger

CAUGHT, MISSED, BROKEN = "caught", "missed", "broken"


@dataclass(frozen=True)
class Outcome:
    """What one control did: caught (red with it, green without), missed, or broken."""

    control: str
    tests: tuple[str, ...]
    verdict: str
    detail: str
    seconds: float


def scratch_copy(into: Path) -> Path:
    """The work tree as it is, under `into`: a shared clone of HEAD (so tests that read
    git's history, such as the releases' upgrade tests, find it) with the work tree's
    tracked and untracked files, not ignored ones, copied over it."""
    subprocess.run(
        ["git", "clone", "-q", "--shared", str(ledger.ROOT), str(into)],
        check=True,
        capture_output=True,
    )
    listing = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ledger.ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listing.split("\0")):
        source, target = ledger.ROOT / name, into / name
        if not source.is_file():
            target.unlink(missing_ok=True)  # deleted in the work tree
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return into


def run_tests(tree: Path, tests: Sequence[str], log: Path) -> int:
    """pytest's exit code for `tests` run in `tree`, as CI runs them, output to `log`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("CI", "true")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-x"]
    with log.open("w") as out:
        return subprocess.run(
            [*command, *tests], cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode


def last_lines(log: Path, count: int = 3) -> str:
    """pytest's FAILED/ERROR summary lines of a run, or its last lines."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return " / ".join(failed[:count] or lines[-count:])


def check(control: str, tests: tuple[str, ...], work: Path) -> Outcome:
    """Apply `control` to a copy, run `tests` with and without it."""
    started = time.monotonic()
    patch = ledger.CONTROLS / control
    changed = scratch_copy(work / "changed")
    applied = subprocess.run(
        ["git", "apply", str(patch)], cwd=changed, capture_output=True, text=True
    )
    if applied.returncode != 0:
        return Outcome(control, tests, BROKEN, f"does not apply: {applied.stderr.strip()}", 0.0)
    red = run_tests(changed, tests, work / "with-control.log")
    if red != 1:
        verdict = MISSED if red == 0 else BROKEN
        detail = f"with the control pytest exited {red}: {last_lines(work / 'with-control.log')}"
        return Outcome(control, tests, verdict, detail, time.monotonic() - started)
    plain = scratch_copy(work / "plain")
    green = run_tests(plain, tests, work / "without-control.log")
    elapsed = time.monotonic() - started
    if green != 0:
        detail = f"without it pytest exited {green}: {last_lines(work / 'without-control.log')}"
        return Outcome(control, tests, BROKEN, detail, elapsed)
    return Outcome(control, tests, CAUGHT, last_lines(work / "with-control.log", 2), elapsed)


def controls_of(
    names: Sequence[str], ledger_text: str | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """(control, its tests) for the ledger's controls named (all when none is)."""
    tests_of: dict[str, list[str]] = {}
    for row in ledger.rows(ledger_text):
        for control in row.controls:
            tests_of.setdefault(control, [])
            tests_of[control] += [t for t in row.tests if t not in tests_of[control]]
    unknown = [n for n in names if n not in tests_of and n + ".patch" not in tests_of]
    if unknown:
        raise SystemExit(f"error: no control named {', '.join(unknown)} in {ledger.LEDGER}")
    chosen = [c for c in tests_of if not names or c in names or c[: -len(".patch")] in names]
    return [(c, tuple(tests_of[c])) for c in chosen]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("controls", nargs="*", help="control names (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies")
    parser.add_argument(
        "--ledger", type=Path, help=f"read the rows from this file (default: {ledger.LEDGER})"
    )
    args = parser.parse_args(argv)
    text = args.ledger.read_text(encoding="utf-8") if args.ledger else None
    outcomes = []
    for control, tests in controls_of(args.controls, text):
        work = Path(tempfile.mkdtemp(prefix=f"control-{control}-"))
        print(f"==> {control}: {' '.join(tests)}", flush=True)
        outcome = check(control, tests, work)
        print(f"    {outcome.verdict} in {outcome.seconds:.0f} s: {outcome.detail}", flush=True)
        if args.keep:
            print(f"    scratch copies and logs: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        outcomes.append(outcome)
    print("\n| control | verdict | seconds |\n|---|---|---|")
    for o in outcomes:
        print(f"| {o.control} | {o.verdict} | {o.seconds:.0f} |")
    caught = sum(o.verdict == CAUGHT for o in outcomes)
    print(f"\n{caught} of {len(outcomes)} controls caught")
    return 0 if caught == len(outcomes) and outcomes else 1


if __name__ == "__main__":
    sys.exit(main())
