"""The ledger of promises (docs/guarantees.md) names tests CI runs and controls that apply,
and no comment or doc says CI runs a test that CI does not collect."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import claims, ledger

SLOW_EXAMPLE = (
    "tests/integration/test_recovery.py::test_kill_9_twice_then_totals_equal_ground_truth"
)


@pytest.fixture(scope="module")
def in_ci() -> frozenset[str]:
    return ledger.collected("not slow")


@pytest.fixture(scope="module")
def slow() -> frozenset[str]:
    return ledger.collected("slow")


def unproven(rows: list[ledger.Row], in_ci: frozenset[str], slow: frozenset[str]) -> list[str]:
    """What is wrong with the rows' tests: gone, `slow`, or a row without a test."""
    problems = []
    for row in rows:
        if not row.tests:
            problems.append(f"{row.key}: names no CI test")
        for node_id in row.tests:
            if ledger.matching(node_id, slow):
                problems.append(f"{row.key}: {node_id} is `slow`: CI does not run it")
            elif not ledger.matching(node_id, in_ci):
                problems.append(f"{row.key}: {node_id} is not a test pytest collects")
    return problems


def test_the_ledger_has_rows() -> None:
    assert len(ledger.rows()) >= 20


def test_every_test_the_ledger_names_is_collected_by_ci(
    in_ci: frozenset[str], slow: frozenset[str]
) -> None:
    assert unproven(ledger.rows(), in_ci, slow) == []


def test_a_row_naming_a_slow_or_gone_test_is_caught(
    in_ci: frozenset[str], slow: frozenset[str]
) -> None:
    """The check above, on rows known to be wrong (its positive control)."""
    table = "| # | promise | CI tests | control |\n|---|---|---|---|\n"
    table += f"| X1 | p | `{SLOW_EXAMPLE}` | `a.patch` |\n"
    table += "| X2 | p | `tests/unit/test_docs.py::test_no_such_thing` | `a.patch` |\n"
    table += "| X3 | p | | `a.patch` |\n"
    assert SLOW_EXAMPLE in slow  # else pick another slow test for this control
    found = unproven(ledger.rows(table), in_ci, slow)
    assert [problem.split(":")[0] for problem in found] == ["X1", "X2", "X3"], found


def test_every_row_has_a_control_that_says_what_it_breaks_and_applies() -> None:
    for row in ledger.rows():
        assert row.controls, f"{row.key} names no control"
        for name in row.controls:
            patch = ledger.CONTROLS / name
            assert patch.is_file(), f"{row.key}: no {patch}"
            first = patch.read_text(encoding="utf-8").splitlines()[0]
            assert first.strip() and not first.startswith("diff "), (
                f"{name}: its first line must say what promise it breaks"
            )
            check = subprocess.run(
                ["git", "apply", "--check", str(patch)],
                cwd=ledger.ROOT,
                capture_output=True,
                text=True,
            )
            assert check.returncode == 0, f"{name} no longer applies: {check.stderr}"


def test_every_control_is_in_the_ledger() -> None:
    named = {name for row in ledger.rows() for name in row.controls}
    patches = {path.name for path in ledger.CONTROLS.glob("*.patch")}
    assert patches - named == set(), "controls that no row of docs/guarantees.md names"


def claimed_but_not_collected(found: list[claims.Claim], in_ci: frozenset[str]) -> list[str]:
    """The claims naming a test (or a module) of which CI collects nothing."""
    wrong = []
    for claim in found:
        for module, test in claim.references:
            if not _collected(module, test, in_ci):
                name = "::".join(filter(None, [module, test]))
                wrong.append(f"{claim.where}: says CI runs {name}: {claim.text}")
    return wrong


def _collected(module: str | None, test: str | None, ids: frozenset[str]) -> bool:
    for node_id in ids:
        path, _, function = node_id.partition("::")
        if module and Path(path).name != module:
            continue
        if test and not (function == test or function.split("[")[0] == test):
            continue
        return True
    return False


def test_no_comment_or_doc_says_ci_runs_a_test_it_does_not_collect(
    in_ci: frozenset[str],
) -> None:
    found = list(claims.claims_of(ledger.ROOT))
    assert found, "no claim found: the scanner is broken"
    assert claimed_but_not_collected(found, in_ci) == []


def test_a_claim_that_ci_runs_a_slow_test_is_caught(in_ci: frozenset[str]) -> None:
    """The scanner and the check, on claims known to be false (its positive control)."""
    module, test = SLOW_EXAMPLE.split("/")[-1].split("::")
    text = (
        f"# CI kills the driver twice in {module}::{test}.\n"
        "# CI runs test_no_such_module.py; it is short.\n"
        "# CI keeps its time: test_docs.py is fast.\n"
    )
    found = [c for _, block in claims.comment_blocks(text) for c in claims.claims_in("x", block)]
    wrong = claimed_but_not_collected(found, in_ci)
    assert len(wrong) == 2 and test in wrong[0] and "no_such_module" in wrong[1], wrong
