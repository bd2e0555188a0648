"""Layout of the files sink's output and reading it back, without Spark: pure Python."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from streaming_app.errors import OutputError

TOTALS = "totals"  # the running totals
WINDOW = "window"  # the sliding-window counts: window-<batch_ms>/
SUCCESS_MARKER = "_SUCCESS"
_NAME = re.compile(r"^([a-z]+)-([0-9]+)$")
_TEMP_NAME = re.compile(r"^_tmp-([a-z]+)-([0-9]+)$")
_INTEGER = re.compile(r"^-?[0-9]+$")


def totals_name(batch_ms: int, kind: str = TOTALS) -> str:
    """Directory name of what was written for one batch (epoch milliseconds, UTC)."""
    return f"{kind}-{batch_ms}"


def temp_name(batch_ms: int, kind: str = TOTALS) -> str:
    """Name under which a batch's output is written before the atomic rename."""
    return f"_tmp-{kind}-{batch_ms}"


def batch_of(name: str, kind: str = TOTALS) -> int | None:
    """The batch time in an output directory name of this kind, or None for any other name."""
    match = _NAME.match(name)
    return int(match.group(2)) if match and match.group(1) == kind else None


def format_value(value: int | Decimal) -> str:
    """A count, or an exact sum without exponent notation."""
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def parse_value(text: str) -> int | Decimal | None:
    """A value as format_value wrote it, or None if it is not one."""
    if _INTEGER.match(text):
        return int(text)
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() and text.isascii() else None


def format_total(pair: tuple[str, int | Decimal]) -> str:
    """One output line: the key, a tab, the total."""
    return f"{pair[0]}\t{format_value(pair[1])}"


def to_prune(names: Iterable[str], keep: int, current_ms: int, kind: str = TOTALS) -> list[str]:
    """Entries to delete: outputs beyond the newest `keep`, and temp dirs of earlier batches."""
    names = list(names)
    batches = sorted((b for n in names if (b := batch_of(n, kind)) is not None), reverse=True)
    doomed = [totals_name(b, kind) for b in batches[keep:]]
    for name in names:
        temp = _TEMP_NAME.match(name)
        if temp and temp.group(1) == kind and int(temp.group(2)) < current_ms:
            doomed.append(name)
    return doomed


def latest_totals_dir(output_dir: str, kind: str = TOTALS) -> tuple[int, str] | None:
    """The newest complete output directory of a kind in a local dir, with its batch time."""
    try:
        names = os.listdir(output_dir)
    except FileNotFoundError:
        raise OutputError(f"output directory {output_dir} does not exist") from None
    except NotADirectoryError:
        raise OutputError(f"{output_dir} is not a directory") from None
    complete = [
        (batch, name)
        for name in names
        if (batch := batch_of(name, kind)) is not None
        and os.path.exists(os.path.join(output_dir, name, SUCCESS_MARKER))
    ]
    if not complete:
        return None
    batch, name = max(complete)
    return batch, os.path.join(output_dir, name)


def read_totals_dir(path: str) -> dict[str, Any]:
    """Read the part files of one output directory into a key -> value mapping."""
    totals: dict[str, Any] = {}
    for name in sorted(os.listdir(path)):
        if not name.startswith("part-"):
            continue
        part = os.path.join(path, name)
        with open(part, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                word, sep, text = line.rstrip("\n").rpartition("\t")
                value = parse_value(text) if sep else None
                if value is None:
                    raise OutputError(f"{part}:{number}: malformed line {line.rstrip()!r}")
                totals[word] = value
    return totals


def read_totals(
    output_dir: str, attempts: int = 5, kind: str = TOTALS
) -> tuple[int | None, dict[str, Any]]:
    """The current totals (or window) of a files sink output dir, and its batch time."""
    for attempt in range(attempts):
        latest = latest_totals_dir(output_dir, kind)
        if latest is None:
            return None, {}
        batch, path = latest
        try:
            return batch, read_totals_dir(path)
        except FileNotFoundError:
            # Pruned or being replaced by the running app just now: look again.
            if attempt == attempts - 1:
                raise OutputError(f"{path} keeps disappearing while being read") from None
            time.sleep(0.05)
        except OSError as exc:
            raise OutputError(f"{path}: {exc.strerror or exc}") from None
    raise AssertionError("unreachable")


def format_totals(totals: dict[str, Any]) -> list[str]:
    """The `streaming-app totals` contract: `key<TAB>value` lines sorted by key."""
    return [format_total((word, totals[word])) for word in sorted(totals)]
