"""The ledger of promises (docs/guarantees.md) read as data, and the suite's collection.

A ledger row is one promise: the CI tests that prove it and its control, a patch under
tests/controls/ that breaks the promise, which those tests must catch. The unit test
tests/unit/test_guarantees.py and the controls' runner (scripts/controls.sh) read it.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "docs" / "guarantees.md"
CONTROLS = ROOT / "tests" / "controls"

PYTEST = (sys.executable, "-m", "pytest", "-p", "no:cacheprovider")
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Row:
    """One promise of the ledger."""

    key: str  # the row's first cell, e.g. "E1"
    promise: str
    tests: tuple[str, ...]  # node ids, as pytest names them from the repository's root
    controls: tuple[str, ...]  # file names under tests/controls/
    failure: str


def _cells(line: str) -> list[str]:
    """A table line's cells; `\\|` is a pipe inside a cell, as in Markdown."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def rows(text: str | None = None) -> list[Row]:
    """Every row of the ledger's tables whose header has `CI tests` and `control`."""
    text = LEDGER.read_text(encoding="utf-8") if text is None else text
    found: list[Row] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            lowered = [cell.lower() for cell in cells]
            if "ci tests" in lowered and "control" in lowered:
                header = lowered
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator line
        by_name = dict(zip(header, cells, strict=False))
        found.append(
            Row(
                key=cells[0],
                promise=by_name.get("promise", ""),
                tests=tuple(_node_ids(by_name.get("ci tests", ""))),
                controls=tuple(
                    Path(name).name for name in _CODE.findall(by_name.get("control", ""))
                ),
                failure=by_name.get("what the control makes fail", ""),
            )
        )
    return found


def _node_ids(cell: str) -> list[str]:
    ids = []
    for code in _CODE.findall(cell):
        code = code.strip()
        if not code.startswith("tests/"):
            code = "tests/integration/" + code if "::" in code else code
        ids.append(code)
    return ids


@functools.cache
def collected(marker_expression: str) -> frozenset[str]:
    """The node ids pytest collects with `-m EXPRESSION` (one subprocess, a few seconds)."""
    return collected_with([], marker_expression)


def collected_with(options: list[str], marker_expression: str) -> frozenset[str]:
    """The node ids pytest collects with these options and `-m EXPRESSION`."""
    return frozenset(collected_in_order(options, marker_expression))


def collected_in_order(options: list[str], marker_expression: str) -> list[str]:
    """The node ids pytest collects with these options and `-m EXPRESSION`, in its order."""
    result = subprocess.run(
        [*PYTEST, "--collect-only", "-q", *options, "-m", marker_expression, "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode not in (0, 5):
        raise RuntimeError(f"pytest --collect-only failed:\n{result.stdout}\n{result.stderr}")
    lines = result.stdout.splitlines()
    return [line.strip() for line in lines if line.startswith("tests/") and "::" in line]


def matching(node_id: str, ids: frozenset[str]) -> list[str]:
    """The collected ids a ledger's node id stands for: itself, or each of its parameters."""
    return sorted(i for i in ids if i == node_id or i.startswith(node_id + "["))
