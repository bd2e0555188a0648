"""The `streaming-app` command line: run, demo and totals; the only place that exits."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from streaming_app import __version__
from streaming_app.errors import EXIT_INTERRUPTED, StreamingAppError
from streaming_app.settings.loading import load_config
from streaming_app.settings.rules import JOBS, SOURCES
from streaming_app.settings.schema import setting_help

log = logging.getLogger("streaming_app")

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def setup_logging(level: str) -> None:
    """Log the app's records to stderr; keep py4j's chatter out."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr, force=True)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # kafka-python logs every failed connection attempt; the app says it once per retry.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def _option(key: str, *decls: str, **kwargs: Any) -> Callable[[Any], Any]:
    flag = "--" + key.replace("_", "-")
    return click.option(flag, *decls, key, default=None, help=setting_help(key), **kwargs)


def _run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for decorate in reversed(
        [
            click.option(
                "--config",
                "config_file",
                type=click.Path(dir_okay=False),
                help="INI file with settings (see conf/) [env: STREAMING_APP_CONFIG]",
            ),
            _option("job", type=click.Choice(JOBS, case_sensitive=False)),
            _option("source", type=click.Choice(SOURCES, case_sensitive=False)),
            _option("host", metavar="HOST"),
            _option("port", metavar="PORT"),
            _option("input_dir", metavar="DIR"),
            _option("bootstrap_servers", metavar="HOST:PORT[,...]"),
            _option("topics", metavar="TOPIC[,...]"),
            _option("starting_offsets", metavar="WHERE"),
            _option("max_rate_per_partition", metavar="N"),
            _option("group_id", metavar="GROUP"),
            _option(
                "on_offset_out_of_range",
                type=click.Choice(["fail", "earliest"], case_sensitive=False),
            ),
            _option("max_value_bytes", metavar="BYTES"),
            _option("window", metavar="SECONDS"),
            _option("slide", metavar="SECONDS"),
            _option("csv_fields", metavar="NAME,NAME,..."),
            _option("key_field", metavar="NAME"),
            _option("value_field", metavar="NAME"),
            _option("checkpoint_dir", metavar="DIR"),
            _option("batch_interval", metavar="SECONDS"),
            _option("checkpoint_interval", metavar="SECONDS"),
            _option(
                "on_incompatible_checkpoint",
                type=click.Choice(["fail", "restore-from-snapshot"], case_sensitive=False),
            ),
            _option("restore_from_snapshot", metavar="PATH"),
            _option("snapshot_interval", metavar="SECONDS"),
            _option("snapshot_dir", metavar="DIR"),
            _option("snapshot_keep", metavar="N"),
            click.option(
                "--sink",
                "sinks",
                multiple=True,
                type=click.Choice(["console", "files", "postgres"]),
                help="an output; repeat for several [env: STREAMING_APP_SINKS, comma-separated]",
            ),
            _option("output_dir", metavar="DIR"),
            _option("postgres_table", metavar="[SCHEMA.]TABLE"),
            _option("master", metavar="URL"),
            click.option(
                "--allow-local-checkpoint",
                "allow_local_checkpoint",
                flag_value="true",
                default=None,
                help=setting_help("allow_local_checkpoint"),
            ),
            _option("stop_timeout", metavar="SECONDS"),
            _option("metrics_file", metavar="FILE"),
            click.option(
                "--progress/--no-progress",
                "progress",
                default=None,
                help=setting_help("progress"),
            ),
            _option("duration", metavar="SECONDS"),
            _option("top_n", metavar="N"),
            _option("state_buckets", metavar="N"),
            _option(
                "log_level",
                type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
            ),
            click.option(
                "--spark-conf",
                "spark_conf",
                multiple=True,
                metavar="KEY=VALUE",
                help="a Spark setting for a new context; repeatable",
            ),
        ]
    ):
        func = decorate(func)
    return func


def _fail(error: StreamingAppError) -> None:
    click.echo(f"Error: {error}", err=True)
    sys.exit(error.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="streaming-app")
def cli() -> None:
    """Recoverable PySpark DStream word counts over socket, directory and Kafka input."""


@cli.command()
@_run_options
def run(
    config_file: str | None,
    sinks: tuple[str, ...],
    spark_conf: tuple[str, ...],
    **settings: str | None,
) -> None:
    """Run the streaming word count; resumes from the checkpoint directory if one exists."""
    from streaming_app.driver.run import run as run_app

    if sinks:
        settings["sinks"] = ",".join(sinks)
    if settings.get("progress") is not None:  # --progress/--no-progress
        settings["progress"] = str(settings["progress"]).lower()
    try:
        config = load_config(config_file, cli=settings, spark_conf=spark_conf)
        setup_logging(config.log_level)
        code = run_app(config)
    except StreamingAppError as error:
        _fail(error)
    sys.exit(code)


@cli.command()
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
        _fail(error)
    sys.exit(code)


@cli.command()
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
        _fail(error)
    if batch_ms is None:
        click.echo(f"no {'window' if window else 'totals'} in {output_dir} yet", err=True)
    for line in format_totals(counts):
        click.echo(line)


@cli.command()
@click.option("--topic", required=True, help="topic to send to (created if missing)")
@click.option(
    "--bootstrap-servers",
    default="127.0.0.1:9092",
    show_default=True,
    envvar="STREAMING_APP_BOOTSTRAP_SERVERS",
    show_envvar=True,
    help="Kafka brokers, host:port[,host:port]; security settings come from --config/env",
)
@click.option(
    "--file",
    "text_file",
    type=click.Path(exists=True, dir_okay=False),
    help="send the lines of this text file [default: generated words]",
)
@click.option("--repeat", is_flag=True, help="send --file over and over")
@click.option(
    "--count",
    type=click.IntRange(min=1),
    help="lines to send [default: the file once; generated: until Ctrl-C]",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0),
    default=100.0,
    show_default=True,
    help="lines per second; 0 sends as fast as the broker takes them",
)
@click.option("--words-per-line", type=click.IntRange(min=1), default=10, show_default=True)
@click.option(
    "--vocabulary",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="distinct generated words (Zipf-distributed: w0 is the most frequent)",
)
@click.option("--seed", type=int, help="random seed of the generated words")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="partitions of the topic if it has to be created",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="INI file with the [kafka] security settings [env: STREAMING_APP_CONFIG]",
)
def produce(
    topic: str,
    bootstrap_servers: str,
    text_file: str | None,
    repeat: bool,
    count: int | None,
    rate: float,
    words_per_line: int,
    vocabulary: int,
    seed: int | None,
    partitions: int,
    config_file: str | None,
) -> None:
    """Send text lines to a Kafka topic at a given rate (a load generator for demos)."""
    from streaming_app.sources.kafka.client import KafkaConnection
    from streaming_app.tools.produce import file_lines, generated_lines
    from streaming_app.tools.produce import produce as send_lines

    setup_logging("warning")
    try:
        config = load_config(config_file, cli={"bootstrap_servers": bootstrap_servers})
    except StreamingAppError as error:
        _fail(error)
    lines = (
        file_lines(text_file, repeat)
        if text_file
        else generated_lines(words_per_line, vocabulary, seed)
    )

    def progress(sent: int, seconds: float) -> None:
        click.echo(f"sent {sent} lines in {seconds:.0f} s ({sent / seconds:.0f}/s)", err=True)

    started = time.monotonic()
    try:
        sent = send_lines(
            KafkaConnection.from_config(config), topic, lines, count, rate, partitions, progress
        )
    except StreamingAppError as error:
        _fail(error)
    seconds = max(time.monotonic() - started, 1e-9)
    click.echo(f"sent {sent} lines to {topic} in {seconds:.1f} s ({sent / seconds:.0f}/s)")


@cli.command("dev-broker")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9092,
    show_default=True,
    help="loopback port; 0 picks a free one",
)
def dev_broker(port: int) -> None:
    """Run a throwaway in-memory Kafka-protocol broker (tansu) on 127.0.0.1 until Ctrl-C."""
    import signal

    from streaming_app.tools.dev_broker import DevBroker

    setup_logging("info")
    broker = DevBroker(port)
    try:
        broker.start()
    except (StreamingAppError, RuntimeError) as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(getattr(error, "exit_code", 1))
    click.echo(f"Kafka-protocol broker (tansu, in memory) on {broker.bootstrap}; Ctrl-C stops it")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        assert broker.proc is not None
        code = broker.proc.wait()
        click.echo(f"Error: the broker exited with code {code}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()


@cli.command(context_settings={"ignore_unknown_options": True})
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


def _register_commands() -> None:
    from streaming_app.cli.checkpoint import checkpoint
    from streaming_app.cli.report import report

    cli.add_command(checkpoint)
    cli.add_command(report)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    try:
        cli(prog_name="streaming-app")
    except KeyboardInterrupt:  # Ctrl-C outside `run`, e.g. during start-up
        click.echo("Interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
