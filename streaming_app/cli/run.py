"""Commands that run the app: `run`, `demo` and `supervise`."""

from __future__ import annotations

import sys
from collections.abc import Mapping

import click

from streaming_app.cli.exits import fail
from streaming_app.cli.options import GroupedCommand, run_options, setup_logging
from streaming_app.errors import StreamingAppError
from streaming_app.settings.loading import load_config
from streaming_app.settings.schema import AppConfig


@click.command(cls=GroupedCommand)
@run_options
def run(
    config_file: str | None,
    sinks: tuple[str, ...],
    spark_conf: tuple[str, ...],
    **settings: str | None,
) -> None:
    """Run the streaming word count; resumes from the checkpoint directory if one exists."""
    try:
        config = run_config(config_file, sinks, spark_conf, settings)
        setup_logging(config.log_level)
        if config.engine == "structured":
            from streaming_app.structured.run import run as run_structured

            code = run_structured(config)
        else:
            from streaming_app.dstream.run import run as run_app

            code = run_app(config)
    except StreamingAppError as error:
        fail(error)
    sys.exit(code)


@click.command()
@click.option(
    "--checkpoint-dir",
    type=click.Path(file_okay=False),
    help="keep the checkpoint here; rerun with the same directory to see recovery "
    "[default: a temporary directory, removed at exit]",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="seconds to run; 0 runs until Ctrl-C",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="loopback port of the sample server [default: a free port, remembered in "
    "the checkpoint directory]",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="sample lines sent per second",
)
@click.option(
    "--batch-interval",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    help="batch interval, seconds",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="also write totals there (read them with `streaming-app totals`)",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def demo(
    checkpoint_dir: str | None,
    duration: float,
    port: int | None,
    rate: float,
    batch_interval: float,
    output_dir: str | None,
    log_level: str,
) -> None:
    """Run locally on a bundled sample text: nothing to install or start first."""
    from streaming_app.tools.demo import run_demo

    setup_logging(log_level)
    try:
        code = run_demo(checkpoint_dir, duration, port, rate, batch_interval, output_dir)
    except StreamingAppError as error:
        fail(error)
    sys.exit(code)


@click.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--max-failures",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="crashes within --failure-window that make a crash loop (then it stops)",
)
@click.option(
    "--failure-window",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="seconds over which crashes are counted",
)
@click.option(
    "--backoff",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="seconds before the first restart; doubles with each crash in the window",
)
@click.option(
    "--max-backoff",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="longest wait between restarts, seconds",
)
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED, metavar="-- [RUN OPTIONS]...")
def supervise(
    max_failures: int,
    failure_window: float,
    backoff: float,
    max_backoff: float,
    run_args: tuple[str, ...],
) -> None:
    """Run `streaming-app run RUN OPTIONS` and restart it when it crashes.

    Crashes (exit 1, or killed) restart with exponential backoff; any other exit ends
    supervise with the same code. SIGTERM/SIGINT are passed on: the driver stops
    gracefully and is not restarted.
    """
    from streaming_app.tools.supervise import Policy
    from streaming_app.tools.supervise import supervise as supervise_driver

    setup_logging("info")
    policy = Policy(max_failures, failure_window, backoff, max(max_backoff, backoff))
    sys.exit(supervise_driver(run_args, policy))


def run_config(
    config_file: str | None,
    sinks: tuple[str, ...] | None,
    spark_conf: tuple[str, ...] | None,
    settings: dict[str, str | None],
    env: Mapping[str, str] | None = None,
) -> AppConfig:
    """The config of `run`'s parsed options (also cli/submit_plan.py's reading of them)."""
    if sinks:
        settings["sinks"] = ",".join(sinks)
    if settings.get("progress") is not None:  # --progress/--no-progress
        settings["progress"] = str(settings["progress"]).lower()
    return load_config(config_file, env, cli=settings, spark_conf=tuple(spark_conf or ()))
