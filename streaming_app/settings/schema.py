"""The frozen, validated application config: defaults < INI file < STREAMING_APP_* env < CLI."""

from __future__ import annotations

import configparser
import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from streaming_app.errors import ConfigError
from streaming_app.jobs.text import DEFAULT_TOKEN_PATTERN
from streaming_app.settings.rules import validate_table_name
from streaming_app.sources.kafka.offsets import (
    OUT_OF_RANGE_POLICIES,
    parse_starting_offsets,
    parse_topics,
)

ENV_PREFIX = "STREAMING_APP_"
# Variables with the prefix that are not settings: they belong to scripts/.
ENV_NOT_SETTINGS = frozenset({"STREAMING_APP_VENV", "STREAMING_APP_CONFIG"})
SOURCES = ("socket", "files", "kafka")
JOBS = ("wordcount", "keyed-sum")
SINKS = ("console", "files", "postgres")
INCOMPATIBLE_POLICIES = ("fail", "restore-from-snapshot")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# OAUTHBEARER and GSSAPI need kafka-python objects or Kerberos set-up beyond settings.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Settings that are credentials: never shown, never written into the checkpoint.
SECRET_SETTINGS = frozenset({"sasl_plain_password", "ssl_password", "postgres_dsn"})
_SECRET_KEY = re.compile(r"secret|password|token|credential|key", re.IGNORECASE)
# Spark durations are whole milliseconds; a year is plenty for any interval or run time.
MAX_SECONDS = 366 * 24 * 3600.0


def spark_seconds(milliseconds: int) -> float:
    """Seconds for PySpark's duration arguments, which it truncates: int(seconds * 1000).

    ms / 1000 can come back as ms - 1 (int(2.01 * 1000) == 2009); half a millisecond
    more always truncates to exactly `milliseconds`.
    """
    return (milliseconds + 0.5) / 1000


def _str(raw: str) -> str:
    value = raw.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


def _optional_str(raw: str) -> str | None:
    return raw.strip() or None


def _int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"{raw.strip()!r} is not an integer") from None


def _seconds(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"{raw.strip()!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"must be a positive number of seconds, got {raw.strip()}")
    if value > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS:.0f} seconds (366 days), got {raw.strip()}")
    if abs(value * 1000 - round(value * 1000)) > 1e-6 or round(value * 1000) < 1:
        raise ValueError(f"must be a whole number of milliseconds, got {raw.strip()}")
    return value


def _optional_seconds(raw: str) -> float | None:
    return _seconds(raw) if raw.strip() else None


def _optional_choice(*choices: str) -> Callable[[str], str | None]:
    def parse(raw: str) -> str | None:
        value = raw.strip().upper()
        if not value:
            return None
        if value not in choices:
            raise ValueError(f"{raw.strip()!r} is not one of {', '.join(choices)}")
        return value

    return parse


def _secret(raw: str) -> str | None:
    # Not stripped: a password may end in a space.
    return raw or None


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw.strip()!r} is not a boolean (true/false)")


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"{raw.strip()!r} is not one of {', '.join(choices)}")
        return value

    return parse


def _sinks(raw: str) -> tuple[str, ...]:
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    if not names:
        raise ValueError("name at least one sink")
    unknown = [n for n in names if n not in SINKS]
    if unknown:
        raise ValueError(f"unknown sink {', '.join(unknown)} (choose from {', '.join(SINKS)})")
    return tuple(dict.fromkeys(names))


def _pattern(raw: str) -> str:
    try:
        compiled = re.compile(raw)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    if compiled.groups:
        raise ValueError("must not contain capturing groups; use (?:...)")
    return raw


def _names(raw: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(","))
    if not any(names):
        return ()
    if not all(names):
        raise ValueError("a field name is empty")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"field {', '.join(duplicates)} appears twice")
    return names


def _delimiter(raw: str) -> str:
    value = "\t" if raw.strip() in ("\\t", "tab") else raw.strip() or raw
    if len(value) != 1 or value in '"\r\n':
        raise ValueError(f"{raw!r} is not one character (use tab for a tab)")
    return value


def _table_name(raw: str) -> str:
    return validate_table_name(raw.strip())


def _setting(section: str, parse: Callable[[str], Any], default: Any, help: str) -> Any:
    return field(default=default, metadata={"section": section, "parse": parse, "help": help})


@dataclass(frozen=True)
class AppConfig:
    """Every setting of one run; built only by `load_config`, never mutated."""

    source: str = _setting("app", _choice(*SOURCES), "socket", "input: socket, files or kafka")
    master: str = _setting("app", _str, "local[2]", "Spark master URL")
    app_name: str = _setting("app", _str, "streaming-app", "Spark application name")
    batch_interval: float = _setting("app", _seconds, 1.0, "batch interval, seconds")
    checkpoint_interval: float | None = _setting(
        "app", _optional_seconds, None, "state checkpoint interval, seconds [10 batches]"
    )
    checkpoint_dir: str = _setting("app", _str, "checkpoint", "checkpoint directory (path or URI)")
    sinks: tuple[str, ...] = _setting(
        "app", _sinks, ("console",), "outputs: console, files, postgres"
    )
    output_dir: str | None = _setting("app", _optional_str, None, "directory of the files sink")
    duration: float | None = _setting(
        "app", _optional_seconds, None, "stop gracefully after this many seconds [never]"
    )
    log_level: str = _setting(
        "app", _choice(*(lv.lower() for lv in LOG_LEVELS)), "info", "log level"
    )
    spark_conf_dir: str | None = _setting(
        "app", _optional_str, None, "Spark conf dir (spark-defaults.conf, log4j2.properties)"
    )
    on_incompatible_checkpoint: str = _setting(
        "app",
        _choice(*INCOMPATIBLE_POLICIES),
        "fail",
        "checkpoint of another version or settings: fail (exit 3) or restore-from-snapshot",
    )
    restore_from_snapshot: str | None = _setting(
        "app",
        _optional_str,
        None,
        "start a new checkpoint seeded from this snapshot (or the newest under this dir)",
    )
    stop_timeout: float = _setting(
        "app",
        _seconds,
        30.0,
        "seconds a requested stop waits for the batches in flight before stopping hard",
    )
    allow_local_checkpoint: bool = _setting(
        "app",
        _bool,
        False,
        "allow a local checkpoint_dir with a cluster master (every node mounts it) [false]",
    )
    metrics_file: str | None = _setting(
        "metrics", _optional_str, None, "append one JSON line per completed batch here [none]"
    )
    progress: bool = _setting("metrics", _bool, True, "log one progress line per completed batch")
    snapshot_interval: float | None = _setting(
        "snapshots", _optional_seconds, None, "state snapshot interval, s [checkpoint_interval]"
    )
    snapshot_dir: str | None = _setting(
        "snapshots", _optional_str, None, "where snapshots go [CHECKPOINT_DIR/snapshots]"
    )
    snapshot_keep: int = _setting("snapshots", _int, 3, "snapshots kept (0 turns them off)")
    job: str = _setting(
        "app", _choice(*JOBS), "wordcount", "wordcount, or keyed-sum (a CSV field summed per key)"
    )
    window: float | None = _setting(
        "window", _optional_seconds, None, "also keep counts over a sliding window, seconds"
    )
    slide: float | None = _setting(
        "window", _optional_seconds, None, "how often the window moves, seconds [batch_interval]"
    )
    csv_fields: tuple[str, ...] = _setting(
        "csv", _names, (), "field names of the CSV records, in order (keyed-sum)"
    )
    key_field: str | None = _setting("csv", _optional_str, None, "CSV field to group by")
    value_field: str | None = _setting("csv", _optional_str, None, "CSV field to sum (a number)")
    csv_delimiter: str = _setting("csv", _delimiter, ",", "CSV field separator (one character)")
    csv_header: bool = _setting(
        "csv", _bool, True, "skip lines that repeat the field names (a header row)"
    )
    host: str = _setting("socket", _str, "127.0.0.1", "socket source host")
    port: int = _setting("socket", _int, 9999, "socket source port")
    input_dir: str | None = _setting(
        "files", _optional_str, None, "directory the files source watches"
    )
    token_pattern: str = _setting("tokenizer", _pattern, DEFAULT_TOKEN_PATTERN, "regex of one word")
    lowercase: bool = _setting("tokenizer", _bool, True, "lower-case words before counting")
    state_buckets: int = _setting(
        "app",
        _int,
        64,
        "buckets the running totals are kept in, for a new checkpoint (0: one state "
        "record per key, as in checkpoints made before state buckets)",
    )
    top_n: int = _setting("console", _int, 10, "words shown per batch by the console sink")
    output_keep: int = _setting("output", _int, 10, "totals files kept by the files sink")
    bootstrap_servers: str = _setting(
        "kafka", _str, "127.0.0.1:9092", "Kafka brokers, host:port[,host:port]"
    )
    topics: tuple[str, ...] = _setting("kafka", parse_topics, (), "topics to read, comma-separated")
    starting_offsets: str = _setting(
        "kafka",
        parse_starting_offsets,
        "earliest",
        "where a new stream starts: earliest, latest, committed or topic:partition=offset,...",
    )
    max_rate_per_partition: int = _setting(
        "kafka", _int, 0, "records per second per partition a batch may take [0: no cap]"
    )
    group_id: str | None = _setting(
        "kafka", _optional_str, None, "consumer group to commit processed offsets to [none]"
    )
    on_offset_out_of_range: str = _setting(
        "kafka",
        _choice(*OUT_OF_RANGE_POLICIES),
        "fail",
        "when offsets to read are gone: fail (exit 4) or earliest (records lost, warned)",
    )
    max_value_bytes: int = _setting(
        "kafka", _int, 1048576, "larger message values are skipped and counted"
    )
    security_protocol: str = _setting(
        "kafka",
        _choice(*(p.lower() for p in SECURITY_PROTOCOLS)),
        "plaintext",
        "plaintext, ssl, sasl_plaintext or sasl_ssl",
    )
    sasl_mechanism: str | None = _setting(
        "kafka", _optional_choice(*SASL_MECHANISMS), None, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
    )
    sasl_plain_username: str | None = _setting("kafka", _optional_str, None, "SASL user name")
    sasl_plain_password: str | None = _setting(
        "kafka", _secret, None, "SASL password (never logged)"
    )
    ssl_cafile: str | None = _setting("kafka", _optional_str, None, "CA bundle for SSL")
    ssl_certfile: str | None = _setting("kafka", _optional_str, None, "client certificate")
    ssl_keyfile: str | None = _setting("kafka", _optional_str, None, "client private key")
    ssl_password: str | None = _setting(
        "kafka", _secret, None, "password of the private key (never logged)"
    )
    ssl_check_hostname: bool = _setting(
        "kafka", _bool, True, "check the broker's certificate host name"
    )
    postgres_dsn: str | None = _setting(
        "postgres", _secret, None, "libpq DSN of the postgres sink (never logged) [PG* env]"
    )
    postgres_table: str = _setting(
        "postgres", _table_name, "word_totals", "table of the postgres sink's totals"
    )
    spark_conf: tuple[tuple[str, str], ...] = ()

    @property
    def batch_ms(self) -> int:
        """The batch interval in milliseconds."""
        return round(self.batch_interval * 1000)

    @property
    def snapshot_ms(self) -> int:
        """The snapshot interval in milliseconds (default: the checkpoint interval)."""
        if self.snapshot_interval is None:
            return self.checkpoint_ms
        return round(self.snapshot_interval * 1000)

    @property
    def snapshots_at(self) -> str:
        """The directory of the state snapshots."""
        return self.snapshot_dir or self.checkpoint_dir.rstrip("/") + "/snapshots"

    @property
    def window_ms(self) -> int | None:
        """The window length in milliseconds, None without a window."""
        return None if self.window is None else round(self.window * 1000)

    @property
    def slide_ms(self) -> int:
        """How often the window moves, in milliseconds (default: every batch)."""
        return self.batch_ms if self.slide is None else round(self.slide * 1000)

    @property
    def checkpoint_ms(self) -> int:
        """The state checkpoint interval in milliseconds (default: 10 batch intervals)."""
        if self.checkpoint_interval is None:
            return 10 * self.batch_ms
        return round(self.checkpoint_interval * 1000)

    def __repr__(self) -> str:
        # Spark settings may carry credentials (fs.s3a.secret.key, ...): never show them.
        shown = [f"{f.name}={self.shown(f.name)!r}" for f in fields(self) if f.name != "spark_conf"]
        spark = {k: ("***" if _SECRET_KEY.search(k) else v) for k, v in self.spark_conf}
        return f"AppConfig({', '.join(shown)}, spark_conf={spark!r})"

    def shown(self, key: str) -> Any:
        """The value of a setting as it may be displayed: credentials are masked."""
        value = getattr(self, key)
        return "***" if key in SECRET_SETTINGS and value is not None else value

    def advisories(self) -> list[str]:
        """Warnings about settings that work but are probably not what the user wants."""
        notes = []
        ratio = self.checkpoint_ms / self.batch_ms
        if not 5 <= ratio <= 10:
            notes.append(
                f"checkpoint_interval is {ratio:g} batch intervals; 5-10 is the usual guidance "
                "(fewer costs throughput, more makes recovery recompute longer lineages)"
            )
        if self.source == "socket" and self.master in ("local", "local[1]"):
            notes.append(
                f"master {self.master} has one core, which the socket receiver takes: "
                "no batch will ever be processed; use local[2] or more"
            )
        return notes


SETTINGS: dict[str, Any] = {f.name: f for f in fields(AppConfig) if "parse" in f.metadata}


def env_name(key: str) -> str:
    """The environment variable that carries setting `key`."""
    return ENV_PREFIX + key.upper()


def setting_help(key: str) -> str:
    """Help text of setting `key`, with its environment variable, for `--help`."""
    return f"{SETTINGS[key].metadata['help']} [env: {env_name(key)}]"


def is_local_path(path: str) -> bool:
    """True for a plain filesystem path, False for a URI such as hdfs:// or s3a://."""
    return "://" not in path and not path.startswith("file:")


def _read_ini(
    path: str, raw: dict[str, tuple[str, str]], spark: dict[str, str], errors: list[str]
) -> None:
    # No default section: configparser would copy [DEFAULT] keys into every section.
    parser = configparser.ConfigParser(interpolation=None, default_section="\0")
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except OSError as exc:
        errors.append(f"config file {path}: {exc.strerror or exc}")
        return
    except configparser.Error as exc:
        errors.append(f"config file {path}: {str(exc).splitlines()[0]}")
        return
    for section in parser.sections():
        for key, value in parser.items(section):
            origin = f"{path} [{section}] {key}"
            if section == "spark":
                if not key.startswith("spark."):
                    errors.append(f"{origin}: Spark settings start with 'spark.'")
                spark[key] = value
            elif key in SETTINGS and SETTINGS[key].metadata["section"] == section:
                raw[key] = (value, origin)
            else:
                errors.append(f"{origin}: unknown setting")


def load_config(
    config_file: str | None = None,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, str | None] | None = None,
    spark_conf: tuple[str, ...] = (),
) -> AppConfig:
    """Build the config from all layers; raise one ConfigError that lists every problem."""
    env = os.environ if env is None else env
    errors: list[str] = []
    raw: dict[str, tuple[str, str]] = {}
    spark: dict[str, str] = {}
    ini_path = config_file or env.get("STREAMING_APP_CONFIG")
    if ini_path:
        _read_ini(ini_path, raw, spark, errors)
    for name, value in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or name in ENV_NOT_SETTINGS:
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key in SETTINGS:
            raw[key] = (value, f"environment {name}")
        else:
            errors.append(f"environment {name}: unknown setting")
    for key, flag_value in (cli or {}).items():
        if flag_value is not None:
            flag = "--sink" if key == "sinks" else f"--{key.replace('_', '-')}"
            raw[key] = (flag_value, flag)
    for item in spark_conf:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("spark."):
            errors.append(f"--spark-conf {name.strip()!r}: expected spark.KEY=VALUE")
        else:
            spark[name.strip()] = value.strip()

    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key, (value, origin) in raw.items():
        try:
            values[key] = SETTINGS[key].metadata["parse"](value)
            origins[key] = origin
        except ValueError as exc:
            errors.append(f"{origin}: {exc}")
    config = AppConfig(**values, spark_conf=tuple(sorted(spark.items())))
    failed = set(raw) - set(values)
    _validate(config, origins, failed, errors)
    if errors:
        raise ConfigError("; ".join(errors))
    return _resolved(config)


def _validate(
    config: AppConfig, origins: Mapping[str, str], failed: set[str], errors: list[str]
) -> None:
    def where(key: str) -> str:
        return origins.get(key, key)

    if not 1 <= config.port <= 65535:
        errors.append(f"{where('port')}: must be between 1 and 65535, got {config.port}")
    if config.state_buckets < 0:
        errors.append(f"{where('state_buckets')}: must be 0 or more, got {config.state_buckets}")
    if config.top_n < 1:
        errors.append(f"{where('top_n')}: must be at least 1, got {config.top_n}")
    if config.output_keep < 1:
        errors.append(f"{where('output_keep')}: must be at least 1, got {config.output_keep}")
    if not failed & {"batch_interval", "checkpoint_interval"} and (
        config.checkpoint_ms % config.batch_ms
    ):
        errors.append(
            f"{where('checkpoint_interval')}: must be a multiple of the batch interval "
            f"({config.batch_interval:g} s), got {config.checkpoint_ms / 1000:g} s"
        )
    if config.snapshot_keep < 0:
        errors.append(f"{where('snapshot_keep')}: must be 0 (no snapshots) or more")
    if not failed & {"batch_interval", "snapshot_interval"} and (
        config.snapshot_ms % config.batch_ms
    ):
        errors.append(
            f"{where('snapshot_interval')}: must be a multiple of the batch interval "
            f"({config.batch_interval:g} s), got {config.snapshot_ms / 1000:g} s"
        )
    _validate_job(config, where, failed, errors)
    if config.source == "files" and not config.input_dir:
        errors.append("input_dir: required by the files source (--input-dir)")
    if config.source == "kafka":
        _validate_kafka(config, where, errors)
    if "files" in config.sinks and not config.output_dir:
        errors.append("output_dir: required by the files sink (--output-dir)")


def _validate_job(
    config: AppConfig, where: Callable[[str], str], failed: set[str], errors: list[str]
) -> None:
    if config.window is None:
        if config.slide is not None:
            errors.append(f"{where('slide')}: needs a window (--window)")
    elif not failed & {"batch_interval", "window", "slide", "checkpoint_interval"}:
        batch, window, slide = config.batch_ms, config.window_ms or 0, config.slide_ms
        for key, ms in (("window", window), ("slide", slide)):
            if ms % batch:
                errors.append(
                    f"{where(key)}: must be a multiple of the batch interval "
                    f"({batch / 1000:g} s), got {ms / 1000:g} s"
                )
        if window % slide:
            errors.append(
                f"{where('window')}: must be a multiple of the slide ({slide / 1000:g} s), "
                f"got {window / 1000:g} s"
            )
        if config.checkpoint_ms % slide:
            errors.append(
                f"{where('checkpoint_interval')}: must be a multiple of the slide "
                f"({slide / 1000:g} s) with a window, got {config.checkpoint_ms / 1000:g} s"
            )
    if config.job != "keyed-sum":
        return
    fields_known = bool(config.csv_fields)
    if not fields_known and "csv_fields" not in failed:
        errors.append("csv_fields: required by the keyed-sum job (the CSV header, in order)")
    for key in ("key_field", "value_field"):
        name = getattr(config, key)
        if not name:
            errors.append(f"{key}: required by the keyed-sum job (--{key.replace('_', '-')})")
        elif fields_known and name not in config.csv_fields:
            errors.append(
                f"{where(key)}: {name!r} is not one of csv_fields ({', '.join(config.csv_fields)})"
            )
    if config.key_field and config.key_field == config.value_field:
        errors.append(f"{where('value_field')}: must differ from key_field")


def _validate_kafka(config: AppConfig, where: Callable[[str], str], errors: list[str]) -> None:
    if not config.topics:
        errors.append("topics: required by the kafka source (--topics)")
    if config.starting_offsets == "committed" and not config.group_id:
        errors.append(f"{where('starting_offsets')}: committed needs a group_id (--group-id)")
    if config.max_rate_per_partition < 0:
        errors.append(f"{where('max_rate_per_partition')}: must be 0 (no cap) or more")
    if config.max_value_bytes < 1:
        errors.append(f"{where('max_value_bytes')}: must be at least 1")
    if config.security_protocol.startswith("sasl"):
        if not config.sasl_mechanism:
            errors.append(f"sasl_mechanism: required by {where('security_protocol')}")
        elif not (config.sasl_plain_username and config.sasl_plain_password):
            errors.append(
                f"sasl_plain_username, sasl_plain_password: required by {config.sasl_mechanism}"
                f" (set the password in the config file or {env_name('sasl_plain_password')})"
            )


def _resolved(config: AppConfig) -> AppConfig:
    # A relative path in the checkpoint would resolve differently after a restart
    # from another working directory, so local paths are made absolute once, here.
    changes = {}
    for key in (
        "checkpoint_dir",
        "output_dir",
        "input_dir",
        "spark_conf_dir",
        "snapshot_dir",
        "restore_from_snapshot",
    ):
        value = getattr(config, key)
        if value and is_local_path(value):
            changes[key] = os.path.abspath(os.path.expanduser(value))
    return dataclasses.replace(config, **changes)


def log_config(config: AppConfig, logger: logging.Logger) -> None:
    """Log the effective settings at debug level."""
    for key in SETTINGS:
        logger.debug("setting %s = %r", key, config.shown(key))
