"""The results section of docs/benchmarks.md: written whole, or one benchmark's block at a time.

Between `<!-- results -->` and `<!-- /results -->` each benchmark's tables stand in a block
of their own, `<!-- bench:NAME -->` ... `<!-- /bench:NAME -->`, so that a run of some
benchmarks (`bench/run.py --only`, `bench/state/memory_run.py`) replaces only theirs.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
RESULTS = re.compile(r"(<!-- results -->\n).*?(\n<!-- /results -->)", flags=re.S)
BLOCK = re.compile(r"<!-- bench:(\S+) -->\n.*?<!-- /bench:\1 -->", flags=re.S)


def block(name: str, lines: list[str]) -> str:
    """One benchmark's tables, between its markers."""
    return "\n".join([f"<!-- bench:{name} -->", *lines, f"<!-- /bench:{name} -->"])


def with_results(text: str, section: str) -> str:
    """The page with its whole results section replaced; the blocks of the old section
    that the new one does not have (the long memory run's, say) are kept, at its end."""
    old = RESULTS.search(text)
    if not old:
        raise SystemExit(f"{DOCS} has no <!-- results --> markers")
    kept = [
        m.group(0)
        for m in BLOCK.finditer(old.group(0))
        if f"<!-- bench:{m.group(1)} -->" not in section
    ]
    section = "\n\n".join([section, *kept])
    return text[: old.start()] + old.group(1) + section + old.group(2) + text[old.end() :]


def with_blocks(text: str, blocks: dict[str, str]) -> str:
    """The page with these blocks replaced (each the output of `block`); a block the page
    does not have yet goes at the end of the results section."""
    for name, body in blocks.items():
        text, found = _marked(name).subn(body.replace("\\", "\\\\"), text)
        if not found:
            if "\n<!-- /results -->" not in text:
                raise SystemExit(f"{DOCS} has no <!-- /results --> marker")
            text = text.replace("\n<!-- /results -->", f"\n\n{body}\n<!-- /results -->", 1)
    return text


def _marked(name: str) -> re.Pattern[str]:
    """A block of the page, markers included."""
    mark = re.escape(name)
    return re.compile(rf"<!-- bench:{mark} -->\n.*?<!-- /bench:{mark} -->", flags=re.S)


def update_docs(section: str | None = None, blocks: dict[str, str] | None = None) -> None:
    """Write the whole results section, or only some benchmarks' blocks, into the page."""
    text = DOCS.read_text()
    if section is not None:
        text = with_results(text, section)
    if blocks:
        text = with_blocks(text, blocks)
    DOCS.write_text(text)
