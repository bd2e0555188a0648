"""The `streaming-app` command group: it registers one module's commands per group, and runs."""

from __future__ import annotations

import logging
import sys

import click

from streaming_app import __version__
from streaming_app.cli.options import CommandsInFull
from streaming_app.errors import EXIT_INTERRUPTED

log = logging.getLogger("streaming_app")


@click.group(cls=CommandsInFull, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="streaming-app")
def cli() -> None:
    """Recoverable PySpark DStream word counts over socket, directory and Kafka input."""


def _register_commands() -> None:
    from streaming_app.cli.checkpoint import checkpoint
    from streaming_app.cli.kafka import dev_broker, produce
    from streaming_app.cli.report import report
    from streaming_app.cli.run import demo, run, supervise
    from streaming_app.cli.totals import totals

    for command in (run, demo, supervise, totals, produce, dev_broker, checkpoint, report):
        cli.add_command(command)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    try:
        cli(prog_name="streaming-app")
    except KeyboardInterrupt:  # Ctrl-C outside `run`, e.g. during start-up
        click.echo("Interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
