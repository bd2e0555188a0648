"""The postgres sink's errors sorted, from libpq's own messages (as libpq 18 words them)."""

from __future__ import annotations

import psycopg
import pytest

from streaming_app.errors import EXIT_USAGE, SinkError
from streaming_app.sinks.postgres.failures import classify

AT = 'connection failed: connection to server at "10.213.10.2", port 5432 failed: '


@pytest.mark.parametrize(
    ("message", "hint"),
    [
        ("SSL error: certificate verify failed", "postgres_dsn's sslrootcert"),
        (
            'server certificate for "10.213.10.2" (and 1 other name) does not match host name '
            '"db.example"',
            "the host in postgres_dsn",
        ),
        (
            'root certificate file "/nowhere/ca.crt" does not exist\nEither provide the file, '
            "use the system's trusted roots with sslrootcert=system, or change sslmode",
            "postgres_dsn's sslrootcert at the CA certificate",
        ),
        ("server does not support SSL, but SSL was required", "sslmode in postgres_dsn"),
        (
            'FATAL:  no pg_hba.conf entry for host "10.213.10.3", user "app", database "db", '
            "no encryption",
            "set sslmode=verify-full",
        ),
        (
            'FATAL:  password authentication failed for user "app"',
            "user and password in postgres_dsn",
        ),
        ('FATAL:  database "nope" does not exist', "fix its name in postgres_dsn"),
    ],
)
def test_a_setting_that_refuses_the_connection_is_a_setup_error(message: str, hint: str) -> None:
    failure = classify(psycopg.OperationalError(AT + message), [])
    assert failure.hint is not None and hint in failure.hint
    assert failure.error.exit_code == EXIT_USAGE  # a supervisor does not restart it
    assert "\n" not in failure.reason


def test_a_network_fault_is_worth_a_retry() -> None:
    failure = classify(psycopg.OperationalError(AT + "Connection refused"), [])
    assert (failure.hint, failure.error) == (None, SinkError)


def test_the_reason_never_shows_a_password() -> None:
    error = psycopg.OperationalError(AT + "SSL error: certificate verify failed (s3cret-pw)")
    failure = classify(error, ["s3cret-pw"])
    assert "s3cret-pw" not in failure.reason
    assert failure.reason.endswith("certificate verify failed (***)")


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (AT + "SSL error: certificate verify failed", "SSL error: certificate verify failed"),
        (AT + 'FATAL:  database "x" does not exist', 'database "x" does not exist'),
        (
            'connection failed: connection to server on socket "/run/pg/.s.PGSQL.5432" '
            "failed: No such file or directory",
            "No such file or directory",
        ),
        ("server closed the connection unexpectedly", "server closed the connection unexpectedly"),
    ],
)
def test_the_reason_is_libpqs_or_the_servers_own_words(message: str, reason: str) -> None:
    assert classify(psycopg.OperationalError(message), []).reason == reason
