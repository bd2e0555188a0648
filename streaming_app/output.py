"""Layout of the files sink's output and reading it back, without Spark: pure Python."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable

from streaming_app.errors import OutputError

TOTALS_PREFIX = "totals-"
TEMP_PREFIX = "_tmp-totals-"
SUCCESS_MARKER = "_SUCCESS"
_TOTALS_NAME = re.compile(r"^totals-([0-9]+)$")
_TEMP_NAME = re.compile(r"^_tmp-totals-([0-9]+)$")


def totals_name(batch_ms: int) -> str:
    """Directory name of the totals written for one batch (epoch milliseconds, UTC)."""
    return f"{TOTALS_PREFIX}{batch_ms}"


def temp_name(batch_ms: int) -> str:
    """Name under which a batch's totals are written before the atomic rename."""
    return f"{TEMP_PREFIX}{batch_ms}"


def batch_of(name: str) -> int | None:
    """The batch time in a totals directory name, or None for any other name."""
    match = _TOTALS_NAME.match(name)
    return int(match.group(1)) if match else None


def format_total(pair: tuple[str, int]) -> str:
    """One output line: word, a tab, the total."""
    return f"{pair[0]}\t{pair[1]}"


def to_prune(names: Iterable[str], keep: int, current_ms: int) -> list[str]:
    """Entries to delete: totals beyond the newest `keep`, and temp dirs of earlier batches."""
    names = list(names)
    batches = sorted((b for b in map(batch_of, names) if b is not None), reverse=True)
    doomed = [totals_name(b) for b in batches[keep:]]
    for name in names:
        temp = _TEMP_NAME.match(name)
        if temp and int(temp.group(1)) < current_ms:
            doomed.append(name)
    return doomed


def latest_totals_dir(output_dir: str) -> tuple[int, str] | None:
    """The newest complete totals directory in a local output dir, with its batch time."""
    try:
        names = os.listdir(output_dir)
    except FileNotFoundError:
        raise OutputError(f"output directory {output_dir} does not exist") from None
    except NotADirectoryError:
        raise OutputError(f"{output_dir} is not a directory") from None
    complete = [
        (batch, name)
        for name in names
        if (batch := batch_of(name)) is not None
        and os.path.exists(os.path.join(output_dir, name, SUCCESS_MARKER))
    ]
    if not complete:
        return None
    batch, name = max(complete)
    return batch, os.path.join(output_dir, name)


def read_totals_dir(path: str) -> dict[str, int]:
    """Read the part files of one totals directory into a word -> total mapping."""
    totals: dict[str, int] = {}
    for name in sorted(os.listdir(path)):
        if not name.startswith("part-"):
            continue
        part = os.path.join(path, name)
        with open(part, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                word, sep, count = line.rstrip("\n").rpartition("\t")
                if not sep or not (count.isascii() and count.isdigit()):
                    raise OutputError(f"{part}:{number}: malformed line {line.rstrip()!r}")
                totals[word] = int(count)
    return totals


def read_totals(output_dir: str, attempts: int = 5) -> tuple[int | None, dict[str, int]]:
    """The current totals of a files sink output dir and the batch time they are as of."""
    for attempt in range(attempts):
        latest = latest_totals_dir(output_dir)
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


def format_totals(totals: dict[str, int]) -> list[str]:
    """The `streaming-app totals` contract: `word<TAB>count` lines sorted by word."""
    return [format_total((word, totals[word])) for word in sorted(totals)]
