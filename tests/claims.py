"""Sentences of the docs and the tests' comments that say CI runs a test, and the tests named.

A claim is a clause (a sentence, or a part of one between semicolons) that mentions CI
and names a test: a module (`test_x.py`), a test (`test_x.py::test_y`, or a test
function's bare name). A clause that says the test is `slow`, or that CI does not run it,
is no claim; "CI of 5036512" (a run, by its commit) does not count as a mention.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_RUN_OF_A_COMMIT = re.compile(r"\bCI(?:'s)?(?: runs?)? (?:of|on) [0-9a-f]{7,40}\b")
_CI = re.compile(r"\bCI\b")
_NOT_A_CLAIM = re.compile(
    r"\bnot in CI\b|\bCI (?:does not|doesn't|never|skips)|outside CI|-m slow"
    r"|not part of (?:the default )?CI|\bno CI\b"
)
_REFERENCE = re.compile(
    r"(?<![\w/.])(?:tests/(?:unit|integration)/(?:\w+/)*)?"
    r"(?P<module>test_\w+\.py)?(?:::)?(?P<test>\btest_\w+(?:\[[^\]\s]+\])?)?"
)
_CLAUSE_END = re.compile(r"(?<=[.;!?])\s+|\n\s*\n")


@dataclass(frozen=True)
class Claim:
    """A clause that says CI runs what it names."""

    where: str  # path:line
    text: str
    references: tuple[tuple[str | None, str | None], ...]  # (module, test) pairs


def references(text: str) -> tuple[tuple[str | None, str | None], ...]:
    found = []
    for match in _REFERENCE.finditer(text):
        module, test = match.group("module"), match.group("test")
        if module and test and test.endswith(".py"):
            test = None
        if test and test.endswith(".py"):
            module, test = test, None
        if module or test:
            found.append((module, test))
    return tuple(found)


def clauses(text: str) -> Iterator[tuple[int, str]]:
    """(line offset, clause) of a text: sentences joined across line breaks, and each line
    of a Markdown table on its own."""
    lines = text.split("\n")
    start = 0
    for number, line in enumerate([*lines, ""]):
        if line.lstrip().startswith("|") or number == len(lines):
            yield from _sentences(start, "\n".join(lines[start:number]))
            if number < len(lines):
                yield from _sentences(number, line)
            start = number + 1


def _sentences(first: int, text: str) -> Iterator[tuple[int, str]]:
    offset = 0
    for piece in _CLAUSE_END.split(text):
        at = text.find(piece, offset)
        if piece.strip():
            yield first + text.count("\n", 0, at), " ".join(piece.split())
        offset = at + len(piece)


def claims_in(where: str, text: str, first_line: int = 1) -> Iterator[Claim]:
    for line, clause in clauses(text):
        stripped = _RUN_OF_A_COMMIT.sub("", clause)
        if not _CI.search(stripped) or _NOT_A_CLAIM.search(stripped):
            continue
        found = references(stripped)
        if found:
            yield Claim(f"{where}:{first_line + line}", clause, found)


def comment_blocks(source: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each run of consecutive comment lines in Python source."""
    block: list[str] = []
    start = last = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        row = token.start[0]
        if block and row != last + 1:
            yield start, "\n".join(block)
            block = []
        if not block:
            start = row
        block.append(token.string.lstrip("#").strip())
        last = row
    if block:
        yield start, "\n".join(block)


def claims_of(root: Path) -> Iterator[Claim]:
    """Every claim in README.md, docs/*.md and the comments of tests/**/*.py."""
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        yield from claims_in(str(page.relative_to(root)), page.read_text(encoding="utf-8"))
    for module in sorted((root / "tests").rglob("*.py")):
        where = str(module.relative_to(root))
        for line, text in comment_blocks(module.read_text(encoding="utf-8")):
            yield from claims_in(where, text, line)
