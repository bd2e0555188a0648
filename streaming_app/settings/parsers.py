"""Parsers of setting values: text from a file, the environment or a flag, to a typed value."""

from __future__ import annotations

import re
from collections.abc import Callable

from streaming_app.settings.rules import SINKS, validate_table_name

# Spark durations are whole milliseconds; a year is plenty for any interval or run time.
MAX_SECONDS = 366 * 24 * 3600.0


def parse_str(raw: str) -> str:
    value = raw.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


def parse_optional_str(raw: str) -> str | None:
    return raw.strip() or None


def parse_int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"{raw.strip()!r} is not an integer") from None


def parse_optional_port(raw: str) -> int | None:
    """A TCP port (0: any free one), or None when empty."""
    if not raw.strip():
        return None
    port = parse_int(raw)
    if not 0 <= port <= 65535:
        raise ValueError(f"{port} is not a port (0-65535)")
    return port


def parse_seconds(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"{raw.strip()!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"must be a positive number of seconds, got {raw.strip()}")
    if value > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS:.0f} seconds (366 days), got {raw.strip()}")
    if abs(value * 1000 - round(value * 1000)) > 1e-6 or round(value * 1000) < 1:
        raise ValueError(f"must be a whole number of milliseconds, got {raw.strip()}")
    return value


def parse_optional_seconds(raw: str) -> float | None:
    return parse_seconds(raw) if raw.strip() else None


def parse_seconds_or_zero(raw: str) -> float:
    """A number of seconds, or 0 (none at all)."""
    if raw.strip() in ("0", "0.0"):
        return 0.0
    try:
        return parse_seconds(raw)
    except ValueError as exc:
        raise ValueError(str(exc).replace("a positive number", "0 or a positive number")) from None


def optional_choice(*choices: str) -> Callable[[str], str | None]:
    def parse(raw: str) -> str | None:
        value = raw.strip().upper()
        if not value:
            return None
        if value not in choices:
            raise ValueError(f"{raw.strip()!r} is not one of {', '.join(choices)}")
        return value

    return parse


def parse_secret(raw: str) -> str | None:
    # Not stripped: a password may end in a space.
    return raw or None


def parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw.strip()!r} is not a boolean (true/false)")


def choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"{raw.strip()!r} is not one of {', '.join(choices)}")
        return value

    return parse


def parse_sinks(raw: str) -> tuple[str, ...]:
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    if not names:
        raise ValueError("name at least one sink")
    unknown = [n for n in names if n not in SINKS]
    if unknown:
        raise ValueError(f"unknown sink {', '.join(unknown)} (choose from {', '.join(SINKS)})")
    return tuple(dict.fromkeys(names))


def parse_pattern(raw: str) -> str:
    try:
        compiled = re.compile(raw)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    if compiled.groups:
        raise ValueError("must not contain capturing groups; use (?:...)")
    return raw


def parse_names(raw: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(","))
    if not any(names):
        return ()
    if not all(names):
        raise ValueError("a field name is empty")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"field {', '.join(duplicates)} appears twice")
    return names


def parse_delimiter(raw: str) -> str:
    value = "\t" if raw.strip() in ("\\t", "tab") else raw.strip() or raw
    if len(value) != 1 or value in '"\r\n':
        raise ValueError(f"{raw!r} is not one character (use tab for a tab)")
    return value


def parse_table_name(raw: str) -> str:
    return validate_table_name(raw.strip())
