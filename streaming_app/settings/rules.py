"""Rules for setting values: table names, topics, starting offsets, the default token pattern.

The settings check them, and the stages apply them.
"""

from __future__ import annotations

import re

PROGRESS_SUFFIX = "_progress"
WINDOW_SUFFIX = "_window"  # shorter than PROGRESS_SUFFIX, so the length rule covers it
STAGING_SUFFIX = "_staging"  # the same
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


# The totals table's fillfactor (per cent of each page filled by inserts) when the postgres
# sink creates it: a batch updates most of its rows, and an update that finds room on its
# row's page is a heap-only tuple (HOT), which touches no index (docs/postgres.md).
DEFAULT_FILLFACTOR = 50


# Starting points of a stream that has no offset log yet.
STARTING_POLICIES = ("earliest", "latest", "committed")


OUT_OF_RANGE_POLICIES = ("fail", "earliest")


EXPLICIT_OFFSET_ITEM = re.compile(
    r"^(?P<topic>[A-Za-z0-9._-]+):(?P<partition>\d+)=(?P<offset>\d+)$"
)


def parse_topics(raw: str) -> tuple[str, ...]:
    """`a,b` -> ('a', 'b'); names are checked against Kafka's legal characters."""
    topics = [t.strip() for t in raw.split(",") if t.strip()]
    if not topics:
        raise ValueError("name at least one topic")
    bad = [t for t in topics if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", t)]
    if bad:
        raise ValueError(f"not a valid topic name: {', '.join(bad)}")
    return tuple(dict.fromkeys(topics))


def parse_starting_offsets(raw: str) -> str:
    """`earliest`, `latest`, `committed`, or explicit `topic:partition=offset,...`."""
    value = raw.strip()
    if value.lower() in STARTING_POLICIES:
        return value.lower()
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise ValueError("must not be empty")
    for item in items:
        if not EXPLICIT_OFFSET_ITEM.match(item):
            raise ValueError(
                f"{item!r} is not earliest, latest, committed or topic:partition=offset"
            )
    return ",".join(items)


# Words are runs of letters and digits, with inner apostrophes kept ("don't").
# Everything else (whitespace, punctuation, underscores, U+FFFD from undecodable
# input) separates words.
DEFAULT_TOKEN_PATTERN = r"[^\W_]+(?:['’][^\W_]+)*"


SOURCES = ("socket", "files", "kafka")


# The DStream engine (the default) and Structured Streaming (docs/structured.md).
ENGINES = ("dstream", "structured")


JOBS = ("wordcount", "keyed-sum")


SINKS = ("console", "files", "postgres")


INCOMPATIBLE_POLICIES = ("fail", "restore-from-snapshot")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


# OAUTHBEARER and GSSAPI need kafka-python objects or Kerberos set-up beyond settings.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
