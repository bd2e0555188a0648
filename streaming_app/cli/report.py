"""The `report` command: summarize (and optionally plot) a metrics file."""

from __future__ import annotations

import sys

import click

from streaming_app.cli.exits import fail
from streaming_app.common.metrics_record import read_metrics
from streaming_app.errors import ConfigError, StreamingAppError
from streaming_app.tools.report import format_summary, plot, summarize

# An empty metrics file is not a usage mistake, but there is nothing to report.
EXIT_NO_BATCHES = 1


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("metrics", metavar="METRICS")
@click.option(
    "--plot",
    "png",
    metavar="FILE.png",
    type=click.Path(dir_okay=False),
    help="also draw throughput and delays over time to this PNG (needs matplotlib)",
)
def report(metrics: str, png: str | None) -> None:
    """Summarize the metrics file the app appends one JSON line per batch to.

    Throughput, processing time, scheduling and total delay percentiles, batches slower
    than the batch interval, Kafka lag, and whether the app is falling behind.
    """
    # Opened here rather than by click.Path(exists=True): a missing file stays one line.
    try:
        records, skipped = read_metrics(metrics)
    except OSError as exc:
        fail(ConfigError(f"{metrics}: {exc.strerror or exc}"))
    if not records:
        note = f" ({skipped} malformed line(s) skipped)" if skipped else ""
        click.echo(f"no batches in {metrics}{note}", err=True)
        sys.exit(EXIT_NO_BATCHES)
    summary = summarize(records)
    if png is not None:  # before printing: a failed plot leaves no half report
        try:
            plot(records, png)
        except StreamingAppError as error:
            fail(error)
        except OSError as exc:
            fail(ConfigError(f"{png}: {exc.strerror or exc}"))
    for line in format_summary(summary, skipped):
        click.echo(line)
    if png is not None:
        click.echo(f"wrote {png}", err=True)


if __name__ == "__main__":
    report(prog_name="streaming-app report")
