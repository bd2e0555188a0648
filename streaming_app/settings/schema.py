"""The settings schema: the frozen AppConfig; each setting with section, parser, default, help."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from streaming_app.common.scrapers import DEFAULT_LINGER_SECONDS
from streaming_app.settings.parsers import (
    choice,
    optional_choice,
    parse_bool,
    parse_delimiter,
    parse_int,
    parse_names,
    parse_optional_port,
    parse_optional_seconds,
    parse_optional_str,
    parse_pattern,
    parse_seconds,
    parse_seconds_or_zero,
    parse_secret,
    parse_sinks,
    parse_str,
    parse_table_name,
)
from streaming_app.settings.rules import (
    DEFAULT_FILLFACTOR,
    DEFAULT_TOKEN_PATTERN,
    ENGINES,
    INCOMPATIBLE_POLICIES,
    JOBS,
    LOG_LEVELS,
    OUT_OF_RANGE_POLICIES,
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    SOURCES,
    parse_starting_offsets,
    parse_topics,
)

ENV_PREFIX = "STREAMING_APP_"
# Variables with the prefix that are not settings: they belong to scripts/ (CODE: how
# submit.sh ships the code; VENV; TEST_WORKERS), to conf/secure/spark-env.sh (PYTHON: the
# daemons' reader of the secret), or (JVM_ARCHIVE, JVM_C1) to how the JVM is launched
# (common/jvm_archive.py, common/jvm_jit.py). A driver started by those inherits them.
ENV_NOT_SETTINGS = frozenset(
    {
        "STREAMING_APP_VENV",
        "STREAMING_APP_CONFIG",
        "STREAMING_APP_JVM_ARCHIVE",
        "STREAMING_APP_JVM_C1",
        "STREAMING_APP_CODE",
        "STREAMING_APP_PYTHON",
        "STREAMING_APP_TEST_WORKERS",
    }
)
# Settings that are credentials: never shown, never written into the checkpoint.
SECRET_SETTINGS = frozenset({"sasl_plain_password", "ssl_password", "postgres_dsn"})
_SECRET_KEY = re.compile(r"secret|password|token|credential|key", re.IGNORECASE)


def _setting(section: str, parse: Callable[[str], Any], default: Any, help: str) -> Any:
    return field(default=default, metadata={"section": section, "parse": parse, "help": help})


@dataclass(frozen=True)
class AppConfig:
    """Every setting of one run; built only by `load_config`, never mutated."""

    source: str = _setting("app", choice(*SOURCES), "socket", "input: socket, files or kafka")
    engine: str = _setting(
        "app", choice(*ENGINES), "dstream", "dstream, or structured (Structured Streaming)"
    )
    master: str = _setting("app", parse_str, "local[2]", "Spark master URL")
    app_name: str = _setting("app", parse_str, "streaming-app", "Spark application name")
    batch_interval: float = _setting("app", parse_seconds, 1.0, "batch interval, seconds")
    checkpoint_interval: float | None = _setting(
        "app", parse_optional_seconds, None, "state checkpoint interval, seconds [10 batches]"
    )
    checkpoint_dir: str = _setting(
        "app", parse_str, "checkpoint", "checkpoint directory (path or URI)"
    )
    sinks: tuple[str, ...] = _setting(
        "app", parse_sinks, ("console",), "outputs: console, files, postgres"
    )
    output_dir: str | None = _setting(
        "app", parse_optional_str, None, "directory of the files sink"
    )
    duration: float | None = _setting(
        "app", parse_optional_seconds, None, "stop gracefully after this many seconds [never]"
    )
    log_level: str = _setting(
        "app", choice(*(lv.lower() for lv in LOG_LEVELS)), "info", "log level"
    )
    spark_conf_dir: str | None = _setting(
        "app", parse_optional_str, None, "Spark conf dir (spark-defaults.conf, log4j2.properties)"
    )
    on_incompatible_checkpoint: str = _setting(
        "app",
        choice(*INCOMPATIBLE_POLICIES),
        "fail",
        "checkpoint of another version or settings: fail (exit 3) or restore-from-snapshot",
    )
    restore_from_snapshot: str | None = _setting(
        "app",
        parse_optional_str,
        None,
        "start a new checkpoint seeded from this snapshot (or the newest under this dir)",
    )
    stop_timeout: float = _setting(
        "app",
        parse_seconds,
        30.0,
        "seconds a requested stop waits for the batches in flight before stopping hard",
    )
    allow_local_checkpoint: bool = _setting(
        "app",
        parse_bool,
        False,
        "allow a local checkpoint_dir with a cluster master (every node mounts it) [false]",
    )
    metrics_file: str | None = _setting(
        "metrics", parse_optional_str, None, "append one JSON line per completed batch here [none]"
    )
    progress: bool = _setting(
        "metrics", parse_bool, True, "log one progress line per completed batch"
    )
    metrics_port: int | None = _setting(
        "metrics",
        parse_optional_port,
        None,
        "serve Prometheus metrics at http://METRICS_HOST:PORT/metrics (0: a free port) [off]",
    )
    metrics_host: str = _setting(
        "metrics", parse_str, "127.0.0.1", "address the Prometheus endpoint listens on"
    )
    metrics_linger_seconds: float = _setting(
        "metrics",
        parse_seconds_or_zero,
        DEFAULT_LINGER_SECONDS,
        "after a stop that was asked for, seconds the endpoint may stay open until every "
        "Prometheus seen lately has read it (0: close at once)",
    )
    snapshot_interval: float | None = _setting(
        "snapshots",
        parse_optional_seconds,
        None,
        "state snapshot interval, s [checkpoint_interval]",
    )
    snapshot_dir: str | None = _setting(
        "snapshots", parse_optional_str, None, "where snapshots go [CHECKPOINT_DIR/snapshots]"
    )
    snapshot_keep: int = _setting("snapshots", parse_int, 3, "snapshots kept (0 turns them off)")
    job: str = _setting(
        "app", choice(*JOBS), "wordcount", "wordcount, or keyed-sum (a CSV field summed per key)"
    )
    window: float | None = _setting(
        "window", parse_optional_seconds, None, "also keep counts over a sliding window, seconds"
    )
    slide: float | None = _setting(
        "window",
        parse_optional_seconds,
        None,
        "how often the window moves, seconds [batch_interval]",
    )
    csv_fields: tuple[str, ...] = _setting(
        "csv", parse_names, (), "field names of the CSV records, in order (keyed-sum)"
    )
    key_field: str | None = _setting("csv", parse_optional_str, None, "CSV field to group by")
    value_field: str | None = _setting(
        "csv", parse_optional_str, None, "CSV field to sum (a number)"
    )
    sum_scale: int = _setting(
        "csv",
        parse_int,
        12,
        "fraction digits of the keyed sum on --engine structured (0-30; a total holds 38 digits)",
    )
    csv_delimiter: str = _setting(
        "csv", parse_delimiter, ",", "CSV field separator (one character)"
    )
    csv_header: bool = _setting(
        "csv", parse_bool, True, "skip lines that repeat the field names (a header row)"
    )
    host: str = _setting("socket", parse_str, "127.0.0.1", "socket source host")
    port: int = _setting("socket", parse_int, 9999, "socket source port")
    input_dir: str | None = _setting(
        "files", parse_optional_str, None, "directory the files source watches"
    )
    token_pattern: str = _setting(
        "tokenizer", parse_pattern, DEFAULT_TOKEN_PATTERN, "regex of one word"
    )
    lowercase: bool = _setting("tokenizer", parse_bool, True, "lower-case words before counting")
    state_buckets: int = _setting(
        "app",
        parse_int,
        64,
        "buckets the running totals are kept in, for a new checkpoint (0: one state "
        "record per key, as in checkpoints made before state buckets)",
    )
    top_n: int = _setting("console", parse_int, 10, "words shown per batch by the console sink")
    output_keep: int = _setting(
        "output", parse_int, 10, "bases (every total) the files sink keeps, with their deltas"
    )
    output_base_interval: float | None = _setting(
        "output",
        parse_optional_seconds,
        None,
        "the files sink writes every total this often, seconds; in between, the totals each "
        "batch changed [checkpoint_interval]",
    )
    bootstrap_servers: str = _setting(
        "kafka", parse_str, "127.0.0.1:9092", "Kafka brokers, host:port[,host:port]"
    )
    topics: tuple[str, ...] = _setting("kafka", parse_topics, (), "topics to read, comma-separated")
    starting_offsets: str = _setting(
        "kafka",
        parse_starting_offsets,
        "earliest",
        "where a new stream starts: earliest, latest, committed or topic:partition=offset,...",
    )
    max_rate_per_partition: int = _setting(
        "kafka", parse_int, 0, "records per second per partition a batch may take [0: no cap]"
    )
    group_id: str | None = _setting(
        "kafka", parse_optional_str, None, "consumer group to commit processed offsets to [none]"
    )
    on_offset_out_of_range: str = _setting(
        "kafka",
        choice(*OUT_OF_RANGE_POLICIES),
        "fail",
        "when offsets to read are gone: fail (exit 4) or earliest (records lost, warned)",
    )
    max_value_bytes: int = _setting(
        "kafka", parse_int, 1048576, "larger message values are skipped and counted"
    )
    kafka_give_up_after: float | None = _setting(
        "kafka",
        parse_optional_seconds,
        600.0,
        "seconds an unreachable Kafka broker is retried before the run ends with exit 1 "
        "(empty: until stopped)",
    )
    security_protocol: str = _setting(
        "kafka",
        choice(*(p.lower() for p in SECURITY_PROTOCOLS)),
        "plaintext",
        "plaintext, ssl, sasl_plaintext or sasl_ssl",
    )
    sasl_mechanism: str | None = _setting(
        "kafka", optional_choice(*SASL_MECHANISMS), None, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
    )
    sasl_plain_username: str | None = _setting("kafka", parse_optional_str, None, "SASL user name")
    sasl_plain_password: str | None = _setting(
        "kafka", parse_secret, None, "SASL password (never logged)"
    )
    ssl_cafile: str | None = _setting("kafka", parse_optional_str, None, "CA bundle for SSL")
    ssl_certfile: str | None = _setting("kafka", parse_optional_str, None, "client certificate")
    ssl_keyfile: str | None = _setting("kafka", parse_optional_str, None, "client private key")
    ssl_password: str | None = _setting(
        "kafka", parse_secret, None, "password of the private key (never logged)"
    )
    ssl_check_hostname: bool = _setting(
        "kafka", parse_bool, True, "check the broker's certificate host name"
    )
    postgres_dsn: str | None = _setting(
        "postgres", parse_secret, None, "libpq DSN of the postgres sink (never logged) [PG* env]"
    )
    postgres_table: str = _setting(
        "postgres", parse_table_name, "word_totals", "table of the postgres sink's totals"
    )
    postgres_give_up_after: float | None = _setting(
        "postgres",
        parse_optional_seconds,
        600.0,
        "seconds the postgres sink retries an unreachable server before the run ends "
        "with exit 1 (empty: until stopped)",
    )
    postgres_fillfactor: int = _setting(
        "postgres",
        parse_int,
        DEFAULT_FILLFACTOR,
        "fillfactor of a totals table the postgres sink creates (10-100): room on each page "
        "for a batch's updates, which then touch no index",
    )
    spark_secret_file: str | None = _setting(
        "security",
        parse_optional_str,
        None,
        "file holding the Spark cluster's secret, readable by the service user only; turns "
        "on authentication and encryption (docs/security.md) [none]",
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
    def output_base_ms(self) -> int:
        """How often the files sink writes a base, in ms (default: the checkpoint interval)."""
        if self.output_base_interval is None:
            return self.checkpoint_ms
        return round(self.output_base_interval * 1000)

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
    """Help text of setting `key`, with its default and its environment variable, for
    `--help`. A text that ends with ` [...]` says there what the default is (`[never]`,
    `[checkpoint_interval]`): that becomes `[default: ...]`; a setting unset by default
    says `[default: none]`."""
    text = SETTINGS[key].metadata["help"]
    note = re.search(r" \[([^\[\]]+)\]$", text)
    default = SETTINGS[key].default
    if note:
        text = f"{text[: note.start()]} [default: {note[1]}]"
    else:
        shown = _shown_default(default) if default not in (None, (), "") else "none"
        text += f" [default: {shown}]"
    return f"{text} [env: {env_name(key)}]"


def _shown_default(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
