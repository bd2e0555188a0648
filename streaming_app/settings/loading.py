"""Loading the settings: defaults < INI file < STREAMING_APP_* env < flags, then validation."""

from __future__ import annotations

import configparser
import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from streaming_app.common import jvm_jit
from streaming_app.common.fs import is_local_path
from streaming_app.errors import ConfigError
from streaming_app.settings.schema import (
    ENV_NOT_SETTINGS,
    ENV_PREFIX,
    SETTINGS,
    AppConfig,
    env_name,
)

MAX_SUM_SCALE = 30  # decimal(38, s): at least 8 integer digits left for a total


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
    jit = env.get(jvm_jit.ENV)
    if jit is not None and jit not in jvm_jit.CHOICES:  # not a setting, but checked as one
        errors.append(
            f"environment {jvm_jit.ENV}: {jit!r} is not one of {', '.join(jvm_jit.CHOICES)}"
        )
    for key, flag_value in (cli or {}).items():
        if flag_value is not None:
            flag = "--sink" if key == "sinks" else f"--{key.replace('_', '-')}"
            raw[key] = (flag_value, flag)
    for item in spark_conf:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("spark."):
            errors.append(f"--spark-conf {name.strip()!r}: expected spark.KEY=VALUE")
        elif name.strip() == "spark.authenticate.secret":
            # Every user of the machine reads a command line (ps); the value is not echoed.
            errors.append(
                "--spark-conf spark.authenticate.secret: a secret on a command line is seen "
                "by every user of the machine; give it with --spark-secret-file (a file only "
                "the service user can read)"
            )
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
    if not 10 <= config.postgres_fillfactor <= 100:
        errors.append(
            f"{where('postgres_fillfactor')}: must be between 10 and 100 (per cent), got "
            f"{config.postgres_fillfactor}"
        )
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
    if not failed & {"batch_interval", "checkpoint_interval", "output_base_interval"} and (
        config.output_base_ms % config.batch_ms
    ):
        errors.append(
            f"{where('output_base_interval')}: must be a multiple of the batch interval "
            f"({config.batch_interval:g} s), got {config.output_base_ms / 1000:g} s"
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
    if not 0 <= config.sum_scale <= MAX_SUM_SCALE:
        errors.append(f"{where('sum_scale')}: must be 0 to {MAX_SUM_SCALE}, got {config.sum_scale}")
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
