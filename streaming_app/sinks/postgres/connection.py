"""A connection of the postgres sink: its DSN parsed and redacted, its options, its tables.

Both sides: the driver's writer and the executors' staging tasks connect the same way
(keepalives, a TCP user timeout, the client encoding, the server's keepalives), and
name the same tables. No Spark here.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from streaming_app.errors import SinkSetupError
from streaming_app.settings.rules import PROGRESS_SUFFIX, validate_table_name
from streaming_app.sinks.postgres.failures import first_line
from streaming_app.sinks.postgres.schema import CLIENT_ENCODING

Connection = psycopg.Connection[tuple[Any, ...]]


class PostgresUnavailableError(ConnectionError):
    """PostgreSQL cannot be reached or dropped the connection: worth retrying."""


# Keepalives and a TCP user timeout turn a vanished server into an error within about a
# minute instead of a hang of the OS default (hours). A DSN may override them.
_CONNECT_DEFAULTS = {
    "application_name": "streaming-app",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}
# The server's side of the same keepalives, set for the sink's session: a session whose
# client vanished while the server waited for its next statement (a COMMIT lost on the
# way) would otherwise keep its transaction, and the progress row's lock with it, until
# the server's own TCP keepalive gives up (two hours by default); every later attempt of
# the batch would wait for that lock. Set with SET, not the startup `options`, which
# poolers such as PgBouncer refuse.
_SERVER_KEEPALIVES = (
    ("keepalives_idle", "tcp_keepalives_idle"),
    ("keepalives_interval", "tcp_keepalives_interval"),
    ("keepalives_count", "tcp_keepalives_count"),
)
_URI = re.compile(r"(\s*postgres(?:ql)?://)([^/?#]*)(.*)", re.IGNORECASE | re.DOTALL)
_QUERY_PASSWORD = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
# The "=" is optional so that a malformed "password secret" is masked too.
_KEYWORD_PASSWORD = re.compile(
    r"((?:^|(?<=\s))(?:ssl)?password\s*=?\s*)('(?:\\.|[^'\\])*(?:'|\\?)|(?:\\.|[^\s\\])*\\?)",
    re.IGNORECASE | re.DOTALL,
)


def redact_dsn(dsn: str) -> str:
    """The DSN (URI or key=value form) with every password shown as ***."""
    uri = _URI.fullmatch(dsn)
    if uri is None:
        return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    scheme, netloc, rest = uri.groups()
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    return scheme + netloc + _QUERY_PASSWORD.sub(r"\1***", rest)


def parse_dsn(dsn: str) -> dict[str, Any]:
    """The DSN's parameters; SinkSetupError (no password shown) if libpq cannot parse it."""
    try:
        return conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        shown = redact_dsn(dsn)
        # libpq quotes the piece it cannot parse, which may hold a password: show a quoted
        # piece only if the redacted DSN shows it anyway.
        reason = re.sub(r'"([^"]*)"', lambda m: m[0] if m[1] in shown else '"***"', first_line(exc))
        # A setting to fix (exit 2): a supervisor's restart would fail the same way.
        raise SinkSetupError(
            f"postgres_dsn: invalid PostgreSQL DSN {shown}: {reason}; fix the DSN"
        ) from None


def with_environment(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters, with what libpq takes from this process's `PG*` environment filled
    in where they say nothing: for a connection made by another process, elsewhere (an
    executor), which has not that environment (PGPASSWORD, PGSSLROOTCERT, ...)."""
    from psycopg import pq

    found = dict(params)
    for option in pq.Conninfo.get_defaults():
        keyword = option.keyword.decode()
        envvar = option.envvar.decode() if option.envvar else None
        if keyword not in found and envvar and os.environ.get(envvar):
            found[keyword] = os.environ[envvar]
    return found


def server_of(params: Mapping[str, Any]) -> str:
    """`host:port` of the server a DSN's parameters name, for messages."""
    host = params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "socket"
    return f"{host}:{params.get('port') or os.environ.get('PGPORT') or 5432}"


def connect(params: Mapping[str, Any], timeout: float, name: str = "streaming-app") -> Connection:
    """A connection with the sink's options (`name`: its application_name, unless the DSN
    sets one), in autocommit mode."""
    # The client encoding is the sink's, whatever the DSN or PGCLIENTENCODING say: with the
    # database's default, a SQL_ASCII database returns text as bytes (schema.py).
    options = {
        **_CONNECT_DEFAULTS,
        "application_name": name,
        **params,
        "client_encoding": CLIENT_ENCODING,
        "connect_timeout": max(1, math.ceil(timeout)),
    }
    conn = psycopg.connect(autocommit=True, **options)
    try:
        settings = [(server, str(options[client])) for client, server in _SERVER_KEEPALIVES]
        query = ", ".join("set_config(%s, %s, false)" for _ in settings)
        conn.execute(f"SELECT {query}", [value for pair in settings for value in pair])
    except BaseException:
        conn.close()
        raise
    return conn


def name_parts(table: str, suffix: str = "") -> tuple[str, ...]:
    """The sink's table `table` + suffix as (schema, name) or (name), as it was named."""
    schema, _, name = validate_table_name(table).rpartition(".")
    return (schema, name + suffix) if schema else (name + suffix,)


def identifiers(table: str, suffix: str = "") -> tuple[sql.Identifier, sql.Identifier]:
    """The sink's table `table` + suffix and its progress table, schema-qualified as named."""
    return sql.Identifier(*name_parts(table, suffix)), sql.Identifier(
        *name_parts(table, PROGRESS_SUFFIX)
    )
