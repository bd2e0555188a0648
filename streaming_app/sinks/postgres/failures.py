"""The postgres sink's errors sorted: worth a retry, or a setting to fix (and which).

Driver side, no Spark. psycopg gives connection errors no SQLSTATE, only libpq's message,
so the sorting matches "SQLSTATE message". A connection that TLS, a password or a database
name refuses fails the same way on every attempt: SinkSetupError (exit 2), which names
what to change in `postgres_dsn`, so that a supervisor does not restart a run that cannot
work. A certificate that does not verify is such a setting, not a network fault.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import psycopg

from streaming_app.errors import SinkError, SinkSetupError

# (pattern, what to fix, the error it is): the first that matches wins.
_FATAL_HINTS: tuple[tuple[str, str, type[SinkError]], ...] = (
    (
        r"certificate verify failed",
        "postgres_dsn's sslrootcert (or PGSSLROOTCERT) must be the CA that signed the "
        "server's certificate",
        SinkSetupError,
    ),
    (
        r"does not match host name",
        "connect by a host name or address the server's certificate names (the host in "
        "postgres_dsn), or give the server a certificate for it",
        SinkSetupError,
    ),
    (
        r"root certificate file|sslrootcert",
        "point postgres_dsn's sslrootcert at the CA certificate (a PEM file this user can read)",
        SinkSetupError,
    ),
    (
        r"server does not support SSL",
        "the server does not offer TLS: turn on ssl on the server, or change sslmode in "
        "postgres_dsn",
        SinkSetupError,
    ),
    (
        r"pg_hba\.conf entry .*no encryption",
        "the server accepts only TLS connections from here: set sslmode=verify-full (and "
        "sslrootcert) in postgres_dsn",
        SinkSetupError,
    ),
    (
        r"^28|authentication failed|no password supplied|pg_hba\.conf|not permitted to log in"
        r'|role "[^"]*" does not exist',
        "check the user and password in postgres_dsn (or PGPASSWORD)",
        SinkSetupError,
    ),
    (
        r'^3D000|database "[^"]*" does not exist',
        "create the database or fix its name in postgres_dsn",
        SinkSetupError,
    ),
    (
        r"^42501|permission denied",
        "grant the DSN's user rights to create and write the tables",
        SinkError,
    ),
    (r"^42P01", "the sink's tables are missing (dropped, or no batch written yet)", SinkError),
)


class Failure(NamedTuple):
    """A psycopg error sorted: its credential-free first line; what to fix and the error to
    raise, or no hint if a retry may help."""

    reason: str
    hint: str | None
    error: type[SinkError]


def secrets_of(params: Mapping[str, Any]) -> list[str]:
    """The passwords a connection's parameters (and libpq's PGPASSWORD) hold."""
    found = [str(v) for k, v in params.items() if k.endswith("password") and v]
    return [*found, *([os.environ["PGPASSWORD"]] if os.environ.get("PGPASSWORD") else [])]


def first_line(exc: BaseException) -> str:
    """The error's first line, without the host and port that libpq's or the server's own
    words follow (the sink's messages name the server or the DSN already)."""
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    line = re.sub(r'^.*?(?:, port \d+ failed:|socket "[^"]*" failed:)\s*', "", line)
    return re.sub(r"^.*FATAL:\s*", "", line)


def classify(exc: psycopg.Error, secrets: Iterable[str]) -> Failure:
    """What the error is: worth a retry (no hint), or what to fix and the error to raise."""
    reason = first_line(exc)
    for secret in secrets:
        reason = reason.replace(secret, "***")
    for pattern, hint, error in _FATAL_HINTS:
        if re.search(pattern, f"{exc.sqlstate or ''} {reason}"):
            return Failure(reason, hint, error)
    if isinstance(exc, psycopg.OperationalError):
        return Failure(reason, None, SinkError)
    return Failure(reason, "retrying will not help", SinkError)
