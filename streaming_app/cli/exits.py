"""The CLI's one way to fail: a StreamingAppError becomes one line on stderr and its exit code.

Library code raises; only the commands in this package turn errors into exits, through
`fail`, so a user sees `Error: ...` and never a traceback for a mistake of theirs.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from streaming_app.errors import StreamingAppError


def fail(error: StreamingAppError) -> NoReturn:
    """Print `Error: <message>` to stderr and exit with the error's code."""
    click.echo(f"Error: {error}", err=True)
    sys.exit(error.exit_code)
