"""The exception root of streaming_app, its subclasses and the process exit codes."""

from __future__ import annotations

# Exit codes are part of the contract with supervisors (docker-compose, systemd,
# `streaming-app supervise`): restart on EXIT_CRASH, never on the others.
EXIT_OK = 0
EXIT_CRASH = 1
EXIT_USAGE = 2
EXIT_CHECKPOINT = 3
EXIT_DATA_LOST = 4
EXIT_INTERRUPTED = 130


class StreamingAppError(Exception):
    """Root of every error that streaming_app raises on purpose."""

    exit_code = EXIT_CRASH


class ConfigError(StreamingAppError):
    """A setting is missing, unknown or invalid (exit 2)."""

    exit_code = EXIT_USAGE


class CheckpointError(StreamingAppError):
    """The checkpoint cannot be read or used; restarting will not help (exit 3)."""

    exit_code = EXIT_CHECKPOINT


class OutputError(StreamingAppError):
    """Sink output cannot be read back (missing or malformed output directory)."""


class StreamingFailedError(StreamingAppError):
    """The streaming context ended with an error or unexpectedly; a restart resumes it."""


class SourceDataLostError(StreamingAppError):
    """Offsets to read are gone from the broker and the policy is `fail` (exit 4, no restart)."""

    exit_code = EXIT_DATA_LOST


class SinkError(StreamingAppError):
    """A sink cannot write and retrying will not help (bad credentials, missing database)."""


class SinkSetupError(SinkError):
    """A sink's table or database does not suit the job: a setting must change (exit 2)."""

    exit_code = EXIT_USAGE


class PeerUnreachableError(StreamingAppError):
    """A server (a database) stayed unreachable longer than the app waits (exit 1: restart)."""


class StopRequestedError(StreamingAppError):
    """The app is stopping; a call that waits for a server (broker, database) gives up."""
