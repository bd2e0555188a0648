"""Kafka helpers for development: `produce` and `dev-broker`."""

from __future__ import annotations

import sys
import time

import click

from streaming_app.cli.exits import fail
from streaming_app.cli.options import setup_logging
from streaming_app.errors import StreamingAppError
from streaming_app.settings.loading import load_config


@click.command()
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
    from streaming_app.sources.kafka.client import KafkaConnection, check_broker
    from streaming_app.sources.kafka.tls import check_tls_files
    from streaming_app.tools.produce import file_lines, generated_lines
    from streaming_app.tools.produce import produce as send_lines

    setup_logging("warning")
    try:
        config = load_config(config_file, cli={"bootstrap_servers": bootstrap_servers})
        connection = KafkaConnection.from_config(config)
        check_tls_files(connection)
        check_broker(connection)
    except StreamingAppError as error:
        fail(error)
    lines = (
        file_lines(text_file, repeat)
        if text_file
        else generated_lines(words_per_line, vocabulary, seed)
    )

    def progress(sent: int, seconds: float) -> None:
        click.echo(f"sent {sent} lines in {seconds:.0f} s ({sent / seconds:.0f}/s)", err=True)

    started = time.monotonic()
    try:
        sent = send_lines(connection, topic, lines, count, rate, partitions, progress)
    except StreamingAppError as error:
        fail(error)
    seconds = max(time.monotonic() - started, 1e-9)
    click.echo(f"sent {sent} lines to {topic} in {seconds:.1f} s ({sent / seconds:.0f}/s)")


@click.command("dev-broker")
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
