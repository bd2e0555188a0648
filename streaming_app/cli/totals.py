"""The `totals` command: the exact totals (or window) in a files sink's output directory."""

from __future__ import annotations

import click

from streaming_app.cli.exits import fail
from streaming_app.errors import StreamingAppError


@click.command()
@click.option(
    "--output-dir",
    required=True,
    envvar="STREAMING_APP_OUTPUT_DIR",
    show_envvar=True,
    type=click.Path(exists=True, file_okay=False),
    help="output directory of the files sink",
)
@click.option(
    "--window",
    "window",
    is_flag=True,
    help="print the latest sliding window (--window runs) instead of the running totals",
)
def totals(output_dir: str, window: bool) -> None:
    """Print the current totals from the files sink: `key<TAB>value` lines sorted by key.

    Word counts are whole numbers; keyed-sum totals are exact decimals.
    """
    from streaming_app.sinks.files_layout import TOTALS, WINDOW, format_totals, read_totals

    kind = WINDOW if window else TOTALS
    try:
        batch_ms, counts = read_totals(output_dir, kind=kind)
    except StreamingAppError as error:
        fail(error)
    if batch_ms is None:
        click.echo(f"no {'window' if window else 'totals'} in {output_dir} yet", err=True)
    for line in format_totals(counts):
        click.echo(line)
