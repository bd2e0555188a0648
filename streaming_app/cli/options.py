"""What the commands share: run settings as options (each backed by an env variable); logging."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from streaming_app.common.log_format import LOG_FORMAT
from streaming_app.settings.rules import ENGINES, JOBS, SOURCES
from streaming_app.settings.schema import setting_help


def setup_logging(level: str) -> None:
    """Log the app's records to stderr; keep py4j's chatter out."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr, force=True)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # kafka-python logs every failed connection attempt; the app says it once per retry.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def _option(key: str, *decls: str, **kwargs: Any) -> Callable[[Any], Any]:
    flag = "--" + key.replace("_", "-")
    return click.option(flag, *decls, key, default=None, help=setting_help(key), **kwargs)


# `run --help`'s sections: each run option's parameter name, by what it is about.
OPTION_GROUPS: dict[str, tuple[str, ...]] = {
    "Input": (
        "source", "host", "port", "input_dir", "bootstrap_servers", "topics",
        "starting_offsets", "max_rate_per_partition", "group_id", "on_offset_out_of_range",
        "max_value_bytes",
    ),
    "Job": (
        "engine", "job", "batch_interval", "window", "slide", "csv_fields", "key_field",
        "value_field", "sum_scale",
    ),
    "Output": ("sinks", "output_dir", "postgres_table", "top_n"),
    "State and checkpoints": (
        "checkpoint_dir", "checkpoint_interval", "on_incompatible_checkpoint",
        "restore_from_snapshot", "snapshot_interval", "snapshot_dir", "snapshot_keep",
        "state_buckets",
    ),
    "Metrics": (
        "metrics_file",
        "metrics_port",
        "metrics_host",
        "metrics_linger_seconds",
        "progress",
    ),
    "Cluster and security": ("master", "allow_local_checkpoint", "spark_secret_file", "spark_conf"),
    "Run and logging": ("config_file", "duration", "stop_timeout", "log_level"),
}  # fmt: skip


class GroupedCommand(click.Command):
    """A command whose `--help` lists its options in OPTION_GROUPS' sections (any option
    in none of them, `--help` itself, under "Other options")."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        sections = [
            (title, [records.pop(name) for name in names if name in records])
            for title, names in OPTION_GROUPS.items()
        ]
        sections.append(("Other options", list(records.values())))
        for title, rows in sections:
            shown = [row for row in rows if row is not None]
            if shown:
                with formatter.section(title):
                    formatter.write_dl(shown)


class CommandsInFull(click.Group):
    """A group whose `--help` gives each command's first line whole, not cut at 45
    characters with "..."."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for decorate in reversed(
        [
            click.option(
                "--config",
                "config_file",
                type=click.Path(dir_okay=False),
                help="INI file with settings (see conf/) [default: none] "
                "[env: STREAMING_APP_CONFIG]",
            ),
            _option("engine", type=click.Choice(ENGINES, case_sensitive=False)),
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
            _option("sum_scale", metavar="DIGITS"),
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
                help="an output; repeat for several [default: console] "
                "[env: STREAMING_APP_SINKS, comma-separated]",
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
            _option("spark_secret_file", metavar="FILE"),
            _option("stop_timeout", metavar="SECONDS"),
            _option("metrics_file", metavar="FILE"),
            _option("metrics_port", metavar="PORT"),
            _option("metrics_host", metavar="ADDRESS"),
            _option("metrics_linger_seconds", metavar="SECONDS"),
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
                help="a Spark setting (applies to a recovered context too); repeatable; "
                "also the config file's [spark] section [default: none] [env: none]",
            ),
        ]
    ):
        func = decorate(func)
    return func
