"""Layout of the files sink's output and reading it back, without Spark: pure Python.

The running totals are a chain per context (a checkpoint's app id): a **base**
`totals-<T>/` holds every total as of batch T, a **delta** `delta-<T>/` only the totals
batch T changed. Each has a chain marker `_chain.json` naming its context and the batch
before it (T minus the batch interval); a delta is written only when the output of that
batch is there, of the same context. The totals as of the newest batch are the newest
complete base updated with the deltas that follow it, in order, up to the first break.
Totals are only ever set, never removed, so a delta needs no tombstones. Directories
written before 0.4.0 (`totals-<T>/`, no marker) are bases of an unknown context; the
sliding window (`window-<T>/`) is written whole every slide, without a marker.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from streaming_app.errors import OutputError

TOTALS = "totals"  # a base: every running total as of its batch
DELTA = "delta"  # the running totals its batch changed
WINDOW = "window"  # the sliding-window counts: window-<batch_ms>/
SUCCESS_MARKER = "_SUCCESS"
CHAIN_MARKER = "_chain.json"
# The `kind` a chain marker gives each directory kind.
LINK_KINDS = {TOTALS: "base", DELTA: "delta"}
_NAME = re.compile(r"^([a-z]+)-([0-9]+)$")
_TEMP_NAME = re.compile(r"^_tmp-([a-z]+)-([0-9]+)$")
_INTEGER = re.compile(r"^-?[0-9]+$")


class Link(NamedTuple):
    """A chain marker: the context that wrote a base or delta, and its previous batch."""

    context: str
    previous: int  # batch time of the context's batch before this one (epoch ms)
    kind: str  # "base" or "delta"


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


def format_link(link: Link) -> bytes:
    """A chain marker's content: one JSON object."""
    return (json.dumps(link._asdict(), sort_keys=True) + "\n").encode("utf-8")


def parse_link(data: bytes) -> Link | None:
    """A chain marker as format_link wrote it, or None if it is not one."""
    try:
        found = json.loads(data.decode("utf-8"))
        link = Link(found["context"], found["previous"], found["kind"])
    except (ValueError, TypeError, KeyError):
        return None
    valid = (
        isinstance(link.context, str)
        and type(link.previous) is int
        and link.kind in LINK_KINDS.values()
    )
    return link if valid else None


def chain_break(context: str, previous: list[Link | None]) -> str | None:
    """Why a delta cannot follow the previous batch's outputs (their links), or None.

    An entry is None for a complete output without a chain marker (written before 0.4.0).
    """
    if any(link is not None and link.context == context for link in previous):
        return None
    if not previous:
        return "no output of the previous batch (a new context, or a restored one)"
    if None in previous:
        return "the previous batch's output has no chain marker (written before 0.4.0)"
    others = sorted({link.context for link in previous if link is not None})
    return f"the previous batch's output is of another context ({', '.join(others)})"


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


def _stale_temps(names: list[str], kinds: tuple[str, ...], current_ms: int) -> list[str]:
    """Temp dirs of these kinds left by batches before the current one."""
    doomed = []
    for name in names:
        temp = _TEMP_NAME.match(name)
        if temp and temp.group(1) in kinds and int(temp.group(2)) < current_ms:
            doomed.append(name)
    return doomed


def to_prune(names: Iterable[str], keep: int, current_ms: int, kind: str = TOTALS) -> list[str]:
    """Entries to delete: outputs beyond the newest `keep`, and temp dirs of earlier batches.

    For outputs written whole every time (the window); the totals' chain: to_prune_chain.
    """
    names = list(names)
    batches = sorted((b for n in names if (b := batch_of(n, kind)) is not None), reverse=True)
    doomed = [totals_name(b, kind) for b in batches[keep:]]
    return doomed + _stale_temps(names, (kind,), current_ms)


def to_prune_chain(names: Iterable[str], keep: int, current_ms: int) -> list[str]:
    """Entries of the totals to delete: bases beyond the newest `keep`, the deltas before
    the oldest kept base, and temp dirs of earlier batches.

    Only outputs up to the current batch count and go: a batch replayed after a crash
    leaves the newer outputs of the run before it alone (it rewrites them in turn).
    """
    names = list(names)
    bases = sorted(
        (b for n in names if (b := batch_of(n, TOTALS)) is not None and b <= current_ms),
        reverse=True,
    )
    doomed = [totals_name(b) for b in bases[keep:]]
    if bases:
        oldest = bases[: max(keep, 1)][-1]
        doomed += [
            totals_name(b, DELTA)
            for n in names
            if (b := batch_of(n, DELTA)) is not None and b <= oldest
        ]
    return doomed + _stale_temps(names, (TOTALS, DELTA), current_ms)


def _list(output_dir: str) -> list[str]:
    try:
        return os.listdir(output_dir)
    except FileNotFoundError:
        raise OutputError(f"output directory {output_dir} does not exist") from None
    except NotADirectoryError:
        raise OutputError(f"{output_dir} is not a directory") from None


def _complete(path: str) -> bool:
    return os.path.exists(os.path.join(path, SUCCESS_MARKER))


def latest_totals_dir(
    output_dir: str, kind: str = TOTALS, names: list[str] | None = None
) -> tuple[int, str] | None:
    """The newest complete output directory of a kind in a local dir, with its batch time.

    Of the totals, that is the newest base: read_totals follows the deltas after it.
    `names`: the directory's entries, if already listed.
    """
    complete = [
        (batch, name)
        for name in (_list(output_dir) if names is None else names)
        if (batch := batch_of(name, kind)) is not None and _complete(os.path.join(output_dir, name))
    ]
    if not complete:
        return None
    batch, name = max(complete)
    return batch, os.path.join(output_dir, name)


def read_link(path: str) -> Link | None:
    """The chain marker of an output directory, None without a (valid) one."""
    try:
        with open(os.path.join(path, CHAIN_MARKER), "rb") as handle:
            return parse_link(handle.read())
    except FileNotFoundError:
        return None


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


def read_chain(
    output_dir: str, read_dir: Callable[[str], dict[str, Any]] | None = None
) -> tuple[int | None, dict[str, Any]]:
    """The totals as of the newest batch the chain reaches, and that batch time.

    The newest complete base, then the complete deltas after it in batch order, each
    following the batch reached so far within the base's context, up to the first break.
    A base without a marker (before 0.4.0) has no deltas. Raises FileNotFoundError when
    a directory goes while it is read (pruned or replaced by the running app).
    read_dir: reads one directory's totals [read_totals_dir] (a reader that polls may
    keep what it parsed: a complete directory does not change).
    """
    read_dir = read_dir or read_totals_dir
    names = _list(output_dir)
    base = latest_totals_dir(output_dir, TOTALS, names)
    if base is None:
        return None, {}
    reached, path = base
    base_link = read_link(path)
    totals = dict(read_dir(path))
    deltas = sorted(b for n in names if (b := batch_of(n, DELTA)) is not None and b > reached)
    for batch in deltas:
        path = os.path.join(output_dir, totals_name(batch, DELTA))
        link = read_link(path) if _complete(path) else None
        if (
            link is None
            or base_link is None
            or link.context != base_link.context
            or link.previous != reached
        ):
            break
        totals.update(read_dir(path))
        reached = batch
    return reached, totals


def read_totals(
    output_dir: str,
    attempts: int = 5,
    kind: str = TOTALS,
    read_dir: Callable[[str], dict[str, Any]] | None = None,
) -> tuple[int | None, dict[str, Any]]:
    """The current totals (or window) of a files sink output dir, and its batch time.

    read_dir: as read_chain's (the totals only)."""
    for attempt in range(attempts):
        try:
            if kind == TOTALS:
                return read_chain(output_dir, read_dir)
            latest = latest_totals_dir(output_dir, kind)
            return (None, {}) if latest is None else (latest[0], read_totals_dir(latest[1]))
        except FileNotFoundError as exc:
            # Pruned or being replaced by the running app just now: look again.
            if attempt == attempts - 1:
                raise OutputError(
                    f"{exc.filename or output_dir} keeps disappearing while being read"
                ) from None
            time.sleep(0.05)
        except OSError as exc:
            raise OutputError(f"{exc.filename or output_dir}: {exc.strerror or exc}") from None
    raise AssertionError("unreachable")


def format_totals(totals: dict[str, Any]) -> list[str]:
    """The `streaming-app totals` contract: `key<TAB>value` lines sorted by key."""
    return [format_total((word, totals[word])) for word in sorted(totals)]
