"""The `checkpoint` command group: `inspect`, `clean` and `scrub` a checkpoint directory."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from streaming_app.cli.exits import fail
from streaming_app.cli.options import CommandsInFull
from streaming_app.common.fs import local_path
from streaming_app.errors import ConfigError, StreamingAppError
from streaming_app.recovery.spark_checkpoint import CheckpointProbe, LocalCheckpointFs, NoProbe
from streaming_app.sources.kafka.offsets import TopicPartition
from streaming_app.tools.checkpoint_clean import apply_plan, plan_clean
from streaming_app.tools.checkpoint_inspect import ensure_checkpoint_dir, inspect_checkpoint
from streaming_app.tools.checkpoint_text import render_clean, render_inspect
from streaming_app.tools.structured_clean import plan_clean_structured
from streaming_app.tools.structured_inspect import inspect_structured, is_structured
from streaming_app.tools.structured_text import render_structured

# An unreachable broker (or one that black-holes packets) must not stall `inspect`.
LAG_TIMEOUT_SECONDS = 10.0

_NO_VERIFY = click.option(
    "--no-verify",
    is_flag=True,
    help="do not start a JVM: whether Spark can read each checkpoint file, and which RDD "
    "folders it references, stay unknown",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="print one JSON object")


def _setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.ERROR)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def local_dir(directory: str) -> str:
    """An absolute local path for a directory argument (file: URIs too); ConfigError otherwise."""
    path = local_path(directory)
    if path is None:
        raise ConfigError(f"{directory}: only local checkpoint directories are supported")
    return os.path.abspath(path)


@contextmanager
def on_checkpoint(directory: str) -> Iterator[tuple[LocalCheckpointFs, str]]:
    """What every checkpoint command does first and last: the log set up, the directory's
    local path; an error of the app's, or of the file system, as one line and its exit."""
    _setup_logging()
    try:
        yield LocalCheckpointFs(), local_dir(directory)
    except StreamingAppError as error:
        fail(error)
    except OSError as exc:
        fail(ConfigError(f"{directory}: {exc.strerror or exc}"))


def _probe(no_verify: bool) -> CheckpointProbe:
    if no_verify:
        return NoProbe()
    from streaming_app.recovery.spark_checkpoint import SparkProbe

    return SparkProbe()


def broker_latest_offsets(bootstrap_servers: str, topics: list[str]) -> dict[TopicPartition, int]:
    """Latest offsets of the topics' partitions; OSError if the broker does not answer in time.

    Asked from a daemon thread with a deadline. Security settings come from the usual
    config file and environment (STREAMING_APP_*).
    """
    from streaming_app.common.retry import describe_error
    from streaming_app.settings.loading import load_config
    from streaming_app.sources.kafka.client import Broker, KafkaConnection

    try:
        config = load_config(cli={"bootstrap_servers": bootstrap_servers})
    except ConfigError as exc:
        raise OSError(f"cannot configure the Kafka client: {exc}") from None
    broker = Broker(KafkaConnection.from_config(config), client_id="streaming-app-inspect")
    outcome: dict[str, Any] = {}

    def ask() -> None:
        try:
            outcome["latest"] = dict(broker.offsets(topics).latest)
        except Exception as exc:
            outcome["error"] = describe_error(exc)
        finally:
            broker.close()

    worker = threading.Thread(target=ask, name="inspect-kafka-lag", daemon=True)
    worker.start()
    worker.join(LAG_TIMEOUT_SECONDS)
    if "latest" in outcome:
        return dict(outcome["latest"])
    if "error" in outcome:
        raise OSError(f"broker {bootstrap_servers} unreachable: {outcome['error']}")
    raise OSError(f"broker {bootstrap_servers} did not answer within {LAG_TIMEOUT_SECONDS:g} s")


@click.group(
    "checkpoint", cls=CommandsInFull, context_settings={"help_option_names": ["-h", "--help"]}
)
def checkpoint() -> None:
    """Inspect a checkpoint directory, or clean out what no recovery needs."""


@checkpoint.command("inspect")
@click.argument("directory")
@_JSON
@click.option(
    "--bootstrap-servers",
    metavar="HOST:PORT[,...]",
    envvar="STREAMING_APP_BOOTSTRAP_SERVERS",
    show_envvar=True,
    help="Kafka brokers to measure the lag of a Kafka checkpoint against [default: no lag]",
)
@_NO_VERIFY
def inspect(directory: str, as_json: bool, bootstrap_servers: str | None, no_verify: bool) -> None:
    """Report what a checkpoint directory holds, for either engine.

    DStream engine: Spark's checkpoint files (and whether Spark can read them), metadata,
    offset and input-files logs, snapshots, RDD folders, sizes and Kafka lag. Structured
    engine (no JVM; --no-verify and --bootstrap-servers do not apply): the query id, the
    offsets and commits logs with the batches planned but not committed, the source logs,
    the state operators and partitions, sizes. The JSON keys are listed in
    streaming_app/tools/checkpoint_inspect.py and structured_inspect.py.
    """
    with on_checkpoint(directory) as (fs, path):
        if is_structured(fs, path):
            report = inspect_structured(fs, path)
        else:
            ensure_checkpoint_dir(fs, path)  # before a JVM starts: a wrong path fails fast
            report = inspect_checkpoint(
                fs, path, _probe(no_verify), bootstrap_servers, broker_latest_offsets
            )
    if as_json:
        click.echo(json.dumps(report, indent=2))
    elif report["engine"] == "structured":
        click.echo(render_structured(report))
    else:
        click.echo(render_inspect(report))


@checkpoint.command("clean")
@click.argument("directory")
@click.option(
    "--dry-run/--apply",
    default=True,
    show_default=True,
    help="only say what would be removed, or remove it",
)
@_JSON
@_NO_VERIFY
def clean(directory: str, dry_run: bool, as_json: bool, no_verify: bool) -> None:
    """Remove what no recovery can need (a dry run by default).

    Unreferenced RDD checkpoint folders, log entries before the prune horizon, snapshots
    beyond snapshot_keep and temp files left by crashes; never the checkpoint files,
    metadata or kafka-tick. Of a Structured Streaming checkpoint, which Spark keeps bounded
    itself, only the temp files left by crashes.
    """
    with on_checkpoint(directory) as (fs, path):
        ensure_checkpoint_dir(fs, path)
        if is_structured(fs, path):
            plan = plan_clean_structured(fs, path)
        else:
            plan = plan_clean(fs, path, _probe(no_verify))
    failed = [] if dry_run else apply_plan(fs, plan)
    if as_json:
        click.echo(json.dumps({**plan.to_json(), "applied": not dry_run, "failed": failed}))
    else:
        click.echo(render_clean(plan, dry_run))
    if failed:
        fail(StreamingAppError(f"could not remove {len(failed)} path(s): {', '.join(failed)}"))


@checkpoint.command("scrub")
@click.argument("directory")
def scrub(directory: str) -> None:
    """Remove the cluster's secret from a DStream checkpoint's files, keeping its state.

    Checkpoint files written before the app kept the secret out of the SparkConf hold
    spark.authenticate.secret. Each such file is rewritten (atomically, and only once Spark
    reads the new file) with the value overwritten by '*'. Stop the app first; then rotate
    the secret, which was readable by whoever could read the directory (docs/security.md).
    """
    with on_checkpoint(directory) as (fs, path):
        ensure_checkpoint_dir(fs, path)
        if is_structured(fs, path):
            click.echo(f"{path}: a Structured Streaming checkpoint holds no Spark settings")
            return
        from streaming_app.recovery.checkpoint_lock import held_alone
        from streaming_app.recovery.spark_checkpoint import SparkProbe
        from streaming_app.tools.secret_scrub import Codec, scrub_checkpoint

        with held_alone(path):  # refused at once while a run holds it, before the JVM starts
            pass
        probe = SparkProbe()
        codec = Codec(probe.decompress, probe.compress, lambda p: bool(probe.check(p).readable))
        scrubbed = scrub_checkpoint(path, codec)
    if scrubbed:
        click.echo(f"removed the secret from {len(scrubbed)} file(s): {', '.join(scrubbed)}")
    else:
        click.echo(f"{path}: no checkpoint file holds a secret")


if __name__ == "__main__":
    checkpoint(prog_name="streaming-app checkpoint")
