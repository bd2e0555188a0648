"""Names of the postgres sink's tables: the one rule that config and the sink both apply."""

from __future__ import annotations

import re

PROGRESS_SUFFIX = "_progress"
WINDOW_SUFFIX = "_window"  # shorter than PROGRESS_SUFFIX, so the length rule covers it
# PostgreSQL silently truncates longer identifiers, which could merge two sinks' tables.
MAX_IDENTIFIER = 63
_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,62}"
_TABLE = re.compile(rf"(?:({_NAME})\.)?({_NAME})")


def validate_table_name(name: str) -> str:
    """The name if it is `table` or `schema.table` of letters, digits and _; else ValueError."""
    match = _TABLE.fullmatch(name)
    if match is None:
        raise ValueError(
            f"{name!r} is not a table name: [schema.]table, each a letter or _ then up to 62 "
            "letters, digits or _"
        )
    if len(match[2] + PROGRESS_SUFFIX) > MAX_IDENTIFIER:
        raise ValueError(
            f"{match[2]!r} is not a table name: too long, at most "
            f"{MAX_IDENTIFIER - len(PROGRESS_SUFFIX)} characters, so that "
            f"{match[2]}{PROGRESS_SUFFIX} fits PostgreSQL's {MAX_IDENTIFIER}"
        )
    return name
