"""Config layers (defaults < INI < STREAMING_APP_* env < CLI), validation and advisories."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from streaming_app.errors import EXIT_USAGE, ConfigError
from streaming_app.jobs.text import DEFAULT_TOKEN_PATTERN
from streaming_app.settings.loading import load_config
from streaming_app.settings.schema import AppConfig


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Neither stray STREAMING_APP_* variables nor the working directory may leak in.
    for name in list(os.environ):
        if name.startswith("STREAMING_APP_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def write_ini(tmp_path: Path, text: str, name: str = "app.ini") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def config_error(
    config_file: str | None = None,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, str | None] | None = None,
    spark_conf: tuple[str, ...] = (),
) -> str:
    """The message of the ConfigError that load_config must raise."""
    with pytest.raises(ConfigError) as info:
        load_config(config_file, env={} if env is None else env, cli=cli, spark_conf=spark_conf)
    return str(info.value)


# --- defaults -------------------------------------------------------------------------


def test_defaults(tmp_path: Path) -> None:
    config = load_config(env={})
    assert config.source == "socket"
    assert config.master == "local[2]"
    assert config.app_name == "streaming-app"
    assert config.batch_interval == 1.0
    assert config.checkpoint_interval is None
    assert config.checkpoint_dir == str(tmp_path / "checkpoint")
    assert config.sinks == ("console",)
    assert config.output_dir is None
    assert config.duration is None
    assert config.log_level == "info"
    assert config.spark_conf_dir is None
    assert (config.host, config.port) == ("127.0.0.1", 9999)
    assert config.input_dir is None
    assert config.token_pattern == DEFAULT_TOKEN_PATTERN
    assert config.lowercase is True
    assert (config.top_n, config.output_keep) == (10, 10)
    assert config.spark_conf == ()


def test_defaults_have_no_advisories() -> None:
    assert load_config(env={}).advisories() == []


def test_batch_and_checkpoint_ms_default_to_ten_batches() -> None:
    config = load_config(env={}, cli={"batch_interval": "2.5"})
    assert (config.batch_ms, config.checkpoint_ms) == (2500, 25000)
    small = load_config(env={}, cli={"batch_interval": "0.2"})
    assert (small.batch_ms, small.checkpoint_ms) == (200, 2000)


def test_explicit_checkpoint_interval_in_ms() -> None:
    config = load_config(env={}, cli={"batch_interval": "0.1", "checkpoint_interval": "0.7"})
    assert (config.batch_ms, config.checkpoint_ms) == (100, 700)


def test_config_is_frozen() -> None:
    config = load_config(env={})
    with pytest.raises(AttributeError):
        config.port = 1  # type: ignore[misc]


# --- INI file ---------------------------------------------------------------------------

FULL_INI = """\
[app]
source = files
master = local[4]
app_name = counts
batch_interval = 2
checkpoint_interval = 20
checkpoint_dir = ck
sinks = console, files
output_dir = out
duration = 30
log_level = DEBUG

[socket]
host = example.org
port = 4000

[files]
input_dir = in

[tokenizer]
token_pattern = \\S+
lowercase = false

[console]
top_n = 3

[output]
output_keep = 4

[spark]
spark.ui.enabled = false
spark.Case.Kept = Yes
"""


def test_ini_file_sets_every_section(tmp_path: Path) -> None:
    config = load_config(write_ini(tmp_path, FULL_INI), env={})
    assert (config.source, config.master, config.app_name) == ("files", "local[4]", "counts")
    assert (config.batch_ms, config.checkpoint_ms) == (2000, 20000)
    assert config.sinks == ("console", "files")
    assert config.duration == 30.0
    assert config.log_level == "debug"
    assert (config.host, config.port) == ("example.org", 4000)
    assert config.input_dir == str(tmp_path / "in")
    assert config.token_pattern == r"\S+"
    assert config.lowercase is False
    assert (config.top_n, config.output_keep) == (3, 4)
    assert config.spark_conf == (("spark.Case.Kept", "Yes"), ("spark.ui.enabled", "false"))


def test_ini_file_from_streaming_app_config_env(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[socket]\nport = 4321\n")
    assert load_config(env={"STREAMING_APP_CONFIG": path}).port == 4321


def test_config_file_argument_beats_streaming_app_config_env(tmp_path: Path) -> None:
    chosen = write_ini(tmp_path, "[socket]\nport = 1111\n", "chosen.ini")
    other = write_ini(tmp_path, "[socket]\nport = 2222\n", "other.ini")
    assert load_config(chosen, env={"STREAMING_APP_CONFIG": other}).port == 1111


def test_unknown_ini_key_names_file_section_and_key(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[app]\nbogus = 1\n")
    assert f"{path} [app] bogus: unknown setting" in config_error(config_file=path, env={})


def test_ini_key_in_the_wrong_section_is_unknown(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[app]\nport = 1234\n")
    assert f"{path} [app] port: unknown setting" in config_error(config_file=path, env={})


def test_unknown_ini_section_is_rejected(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[kafka]\nbrokers = x:9092\n")
    assert f"{path} [kafka] brokers: unknown setting" in config_error(config_file=path, env={})


def test_spark_section_accepts_only_spark_keys(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[spark]\nui.enabled = false\nspark.ok = 1\n")
    message = config_error(config_file=path, env={})
    assert f"{path} [spark] ui.enabled: Spark settings start with 'spark.'" in message
    assert "spark.ok" not in message


def test_missing_ini_file_is_a_config_error(tmp_path: Path) -> None:
    path = str(tmp_path / "absent.ini")
    assert f"config file {path}: No such file or directory" in config_error(
        config_file=path, env={}
    )


def test_ini_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "port = 1\n")
    message = config_error(config_file=path, env={})
    assert message.startswith(f"config file {path}: ")
    assert "\n" not in message


def test_ini_settings_in_default_section_are_not_silently_ignored(tmp_path: Path) -> None:
    # A key under [DEFAULT] must either take effect or be rejected, never be dropped.
    path = write_ini(tmp_path, "[DEFAULT]\nport = 1234\n")
    try:
        config = load_config(path, env={})
    except ConfigError as error:
        assert "port" in str(error)
    else:
        assert config.port == 1234


# --- environment ----------------------------------------------------------------------


def test_env_sets_values() -> None:
    env = {
        "STREAMING_APP_PORT": "4000",
        "STREAMING_APP_SINKS": "files,console",
        "STREAMING_APP_OUTPUT_DIR": "/srv/out",
        "STREAMING_APP_LOWERCASE": "no",
        "STREAMING_APP_BATCH_INTERVAL": "0.5",
    }
    config = load_config(env=env)
    assert config.port == 4000
    assert config.sinks == ("files", "console")
    assert config.output_dir == "/srv/out"
    assert config.lowercase is False
    assert config.batch_ms == 500


def test_unknown_env_var_is_rejected() -> None:
    message = config_error(env={"STREAMING_APP_PROT": "4000"})
    assert "environment STREAMING_APP_PROT: unknown setting" in message


def test_script_env_vars_and_unprefixed_vars_are_ignored() -> None:
    env = {"STREAMING_APP_VENV": "/opt/venv", "PORT": "1", "STREAMING_APPX": "1"}
    assert load_config(env=env).port == 9999


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMING_APP_TOP_N", "7")
    assert load_config().top_n == 7


# --- precedence -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file_port", "env_port", "cli_port", "expected"),
    [
        pytest.param(None, None, None, 9999, id="defaults"),
        pytest.param("1111", None, None, 1111, id="file>defaults"),
        pytest.param(None, "2222", None, 2222, id="env>defaults"),
        pytest.param(None, None, "3333", 3333, id="cli>defaults"),
        pytest.param("1111", "2222", None, 2222, id="env>file"),
        pytest.param("1111", None, "3333", 3333, id="cli>file"),
        pytest.param(None, "2222", "3333", 3333, id="cli>env"),
        pytest.param("1111", "2222", "3333", 3333, id="cli>env>file"),
    ],
)
def test_precedence(
    tmp_path: Path,
    file_port: str | None,
    env_port: str | None,
    cli_port: str | None,
    expected: int,
) -> None:
    path = write_ini(tmp_path, f"[socket]\nport = {file_port}\n") if file_port else None
    env = {"STREAMING_APP_PORT": env_port} if env_port else {}
    assert load_config(path, env=env, cli={"port": cli_port}).port == expected


def test_unset_cli_flag_does_not_override_env() -> None:
    assert load_config(env={"STREAMING_APP_HOST": "h"}, cli={"host": None}).host == "h"


def test_cli_spark_conf_beats_spark_section(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[spark]\nspark.a = file\nspark.b = file\n")
    config = load_config(path, env={}, spark_conf=("spark.a=cli", "spark.c = x=y"))
    assert config.spark_conf == (("spark.a", "cli"), ("spark.b", "file"), ("spark.c", "x=y"))


@pytest.mark.parametrize(
    ("item", "key"), [("ui.enabled=false", "ui.enabled"), ("spark.ui.enabled", "spark.ui.enabled")]
)
def test_bad_spark_conf_item(item: str, key: str) -> None:
    message = config_error(env={}, spark_conf=(item,))
    assert f"--spark-conf {key!r}: expected spark.KEY=VALUE" in message


def test_a_bad_spark_conf_item_never_echoes_its_value() -> None:
    message = config_error(env={}, spark_conf=("fs.s3a.secret.key=hunter2",))
    assert "hunter2" not in message


def test_repr_masks_secret_spark_settings() -> None:
    config = load_config(
        env={}, spark_conf=("spark.hadoop.fs.s3a.secret.key=hunter2", "spark.ui.port=4050")
    )
    assert "hunter2" not in repr(config)
    assert "'spark.ui.port': '4050'" in repr(config)


def test_a_failed_interval_adds_no_false_cross_field_error() -> None:
    message = config_error(env={}, cli={"batch_interval": "0", "checkpoint_interval": "2.5"})
    assert "--batch-interval: must be a positive number" in message
    assert "multiple of the batch interval" not in message


# --- validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cli", "fragment"),
    [
        ({"batch_interval": "0"}, "--batch-interval: must be a positive number of seconds"),
        ({"batch_interval": "-2"}, "--batch-interval: must be a positive number of seconds"),
        ({"batch_interval": "abc"}, "--batch-interval: 'abc' is not a number of seconds"),
        ({"batch_interval": "0.0005"}, "--batch-interval: must be a whole number of milli"),
        ({"duration": "1.0001"}, "--duration: must be a whole number of milliseconds"),
        (
            {"batch_interval": "2", "checkpoint_interval": "3"},
            "--checkpoint-interval: must be a multiple of the batch interval",
        ),
        ({"port": "0"}, "--port: must be between 1 and 65535, got 0"),
        ({"port": "65536"}, "--port: must be between 1 and 65535, got 65536"),
        ({"port": "http"}, "--port: 'http' is not an integer"),
        ({"source": "files"}, "input_dir: required by the files source"),
        ({"sinks": "files"}, "output_dir: required by the files sink"),
        ({"sinks": "console,printer"}, "--sink: unknown sink printer"),
        ({"sinks": " , "}, "--sink: name at least one sink"),
        ({"token_pattern": "[a-"}, "--token-pattern: not a valid regular expression"),
        ({"token_pattern": r"(\w+)"}, "--token-pattern: must not contain capturing groups"),
        ({"source": "kafka"}, "topics: required by the kafka source (--topics)"),
        ({"topics": "bad topic"}, "--topics: not a valid topic name: bad topic"),
        ({"starting_offsets": "oldest"}, "--starting-offsets: 'oldest' is not earliest"),
        ({"on_offset_out_of_range": "skip"}, "--on-offset-out-of-range: 'skip' is not one of"),
        ({"sasl_mechanism": "md5"}, "--sasl-mechanism: 'md5' is not one of PLAIN"),
        ({"source": "http"}, "--source: 'http' is not one of socket, files, kafka"),
        ({"top_n": "0"}, "--top-n: must be at least 1"),
        ({"output_keep": "0"}, "--output-keep: must be at least 1"),
        ({"lowercase": "maybe"}, "--lowercase: 'maybe' is not a boolean"),
        ({"log_level": "loud"}, "--log-level: 'loud' is not one of"),
        ({"master": "  "}, "--master: must not be empty"),
    ],
)
def test_invalid_setting_is_named(cli: dict[str, str], fragment: str) -> None:
    assert fragment in config_error(env={}, cli=cli)


def test_config_error_exits_with_usage_code() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env={}, cli={"port": "0"})
    assert info.value.exit_code == EXIT_USAGE


def test_all_problems_are_reported_at_once_in_one_line(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[app]\nbogus = 1\n")
    cli = {
        "batch_interval": "0",
        "port": "70000",
        "source": "files",
        "sinks": "files",
        "token_pattern": "(x)",
    }
    message = config_error(config_file=path, env={"STREAMING_APP_NOPE": "1"}, cli=cli)
    for fragment in (
        "[app] bogus",
        "STREAMING_APP_NOPE",
        "--batch-interval",
        "--port",
        "input_dir",
        "output_dir",
        "--token-pattern",
    ):
        assert fragment in message
    assert "\n" not in message


def test_errors_name_the_layer_the_value_came_from(tmp_path: Path) -> None:
    path = write_ini(tmp_path, "[console]\ntop_n = 0\n")
    message = config_error(config_file=path, env={"STREAMING_APP_PORT": "0"})
    assert f"{path} [console] top_n: must be at least 1" in message
    assert "environment STREAMING_APP_PORT: must be between 1 and 65535" in message


@pytest.mark.parametrize(
    "cli",
    [
        {"port": "1"},
        {"port": "65535"},
        {"batch_interval": "0.001"},
        {"batch_interval": "0.5", "checkpoint_interval": "2.5"},
        {"token_pattern": r"(?:\w)+"},
        {"source": "files", "input_dir": "in", "sinks": "files", "output_dir": "out"},
    ],
)
def test_valid_boundaries_are_accepted(cli: dict[str, str]) -> None:
    assert isinstance(load_config(env={}, cli=cli), AppConfig)


@pytest.mark.parametrize("key", ["batch_interval", "checkpoint_interval"])
def test_interval_that_rounds_to_zero_ms_is_rejected(key: str) -> None:
    # 1e-10 s is positive but 0 ms: it must be a ConfigError, not a crash or a 0 ms interval.
    flag = "--" + key.replace("_", "-")
    assert flag in config_error(env={}, cli={key: "1e-10"})


@pytest.mark.parametrize("key", ["batch_interval", "duration"])
def test_huge_interval_is_a_config_error(key: str) -> None:
    flag = "--" + key.replace("_", "-")
    assert flag in config_error(env={}, cli={key: "1e306"})


# --- advisories -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checkpoint", "warns"),
    [("1", True), ("4", True), ("5", False), ("10", False), ("11", True), ("20", True)],
)
def test_checkpoint_ratio_outside_5_to_10_is_advised(checkpoint: str, warns: bool) -> None:
    config = load_config(env={}, cli={"batch_interval": "1", "checkpoint_interval": checkpoint})
    notes = config.advisories()
    assert any("checkpoint_interval" in note for note in notes) is warns
    if warns:
        assert f"is {checkpoint} batch intervals" in notes[0]


@pytest.mark.parametrize("master", ["local", "local[1]"])
def test_single_core_master_with_socket_source_is_advised(master: str) -> None:
    notes = load_config(env={}, cli={"master": master}).advisories()
    assert len(notes) == 1
    assert master in notes[0] and "one core" in notes[0]


@pytest.mark.parametrize(
    "cli",
    [
        {"master": "local[2]"},
        {"master": "local[*]"},
        {"master": "local[1]", "source": "files", "input_dir": "in"},
    ],
)
def test_no_core_advisory_otherwise(cli: dict[str, str]) -> None:
    assert load_config(env={}, cli=cli).advisories() == []


# --- paths ----------------------------------------------------------------------------


def test_relative_paths_are_made_absolute_against_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ini = write_ini(tmp_path, "[app]\nspark_conf_dir = sparkconf\n")
    cli = {
        "source": "files",
        "input_dir": "in",
        "checkpoint_dir": "state/ck",
        "sinks": "files",
        "output_dir": "./out",
    }
    config = load_config(ini, env={}, cli=cli)
    assert config.input_dir == str(work / "in")
    assert config.checkpoint_dir == str(work / "state" / "ck")
    assert config.output_dir == str(work / "out")
    assert config.spark_conf_dir == str(work / "sparkconf")


def test_home_relative_path_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = load_config(env={}, cli={"checkpoint_dir": "~/ck"})
    assert config.checkpoint_dir == str(tmp_path / "home" / "ck")


@pytest.mark.parametrize("uri", ["hdfs://nn:8020/app/ck", "s3a://bucket/ck", "file:///tmp/ck"])
def test_uris_are_left_alone(uri: str) -> None:
    assert load_config(env={}, cli={"checkpoint_dir": uri}).checkpoint_dir == uri


@pytest.mark.parametrize("name", ["local.ini", "cluster.ini", "docker.ini"])
def test_shipped_config_files_load(name: str) -> None:
    path = Path(__file__).resolve().parents[3] / "conf" / name
    config = load_config(str(path), env={})
    assert config.checkpoint_dir
    if name != "docker.ini":  # the examples carry a [kafka] section to switch to
        kafka = load_config(str(path), env={}, cli={"source": "kafka"})
        assert kafka.topics == ("words",)


# --- kafka_give_up_after ----------------------------------------------------------------


def test_kafka_give_up_after_is_600_s_and_empty_retries_until_stopped(tmp_path: Path) -> None:
    assert load_config(env={}).kafka_give_up_after == 600
    ini = write_ini(tmp_path, "[kafka]\nkafka_give_up_after = 20\n")
    assert load_config(ini, env={}).kafka_give_up_after == 20
    env = {"STREAMING_APP_KAFKA_GIVE_UP_AFTER": "7.5"}
    assert load_config(ini, env=env).kafka_give_up_after == 7.5  # env beats the file
    assert load_config(env={"STREAMING_APP_KAFKA_GIVE_UP_AFTER": ""}).kafka_give_up_after is None


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("0", "must be a positive number of seconds, got 0"),
        ("-1", "must be a positive number of seconds, got -1"),
        ("never", "'never' is not a number of seconds"),
    ],
)
def test_a_wrong_kafka_give_up_after_is_named_where_it_was_set(
    tmp_path: Path, value: str, fragment: str
) -> None:
    ini = write_ini(tmp_path, f"[kafka]\nkafka_give_up_after = {value}\n")
    assert f"{ini} [kafka] kafka_give_up_after: {fragment}" in config_error(ini)
    env = {"STREAMING_APP_KAFKA_GIVE_UP_AFTER": value}
    assert f"environment STREAMING_APP_KAFKA_GIVE_UP_AFTER: {fragment}" in config_error(env=env)


def test_metrics_linger_seconds_is_150_s_0_turns_it_off_and_every_layer_sets_it(
    tmp_path: Path,
) -> None:
    assert load_config(env={}).metrics_linger_seconds == 150
    ini = write_ini(tmp_path, "[metrics]\nmetrics_linger_seconds = 0\n")
    assert load_config(ini, env={}).metrics_linger_seconds == 0
    env = {"STREAMING_APP_METRICS_LINGER_SECONDS": "75.5"}
    assert load_config(ini, env=env).metrics_linger_seconds == 75.5
    cli = {"metrics_linger_seconds": "30"}
    assert load_config(ini, env=env, cli=cli).metrics_linger_seconds == 30


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("-1", "must be 0 or a positive number of seconds, got -1"),
        ("long", "'long' is not a number of seconds"),
    ],
)
def test_a_wrong_metrics_linger_seconds_is_named(tmp_path: Path, value: str, fragment: str) -> None:
    ini = write_ini(tmp_path, f"[metrics]\nmetrics_linger_seconds = {value}\n")
    assert f"{ini} [metrics] metrics_linger_seconds: {fragment}" in config_error(ini)
    cli = {"metrics_linger_seconds": value}
    assert f"--metrics-linger-seconds: {fragment}" in config_error(env={}, cli=cli)


def test_the_jit_switch_is_not_a_setting() -> None:
    # STREAMING_APP_JVM_C1=0 (common/jvm_jit.py) is read by the launcher, not a setting:
    # a user who turns C1-only off must not get "unknown setting" (exit 2).
    assert load_config(env={"STREAMING_APP_JVM_C1": "0"}).port == 9999
    assert load_config(env={"STREAMING_APP_JVM_C1": "driver"}).port == 9999
    # A value it does not know is refused (exit 2) naming the variable, not taken as on.
    assert "environment STREAMING_APP_JVM_C1: 'executors' is not one of 1, 0, driver" in (
        config_error(env={"STREAMING_APP_JVM_C1": "executors"})
    )


def test_the_postgres_fillfactor_is_a_per_cent_from_10_to_100() -> None:
    assert load_config(env={}).postgres_fillfactor == 50
    env = {"STREAMING_APP_POSTGRES_FILLFACTOR": "100"}
    assert load_config(env=env).postgres_fillfactor == 100
    for wrong in ("9", "101", "0"):
        message = config_error(env={"STREAMING_APP_POSTGRES_FILLFACTOR": wrong})
        assert message == (
            "environment STREAMING_APP_POSTGRES_FILLFACTOR: must be between 10 and 100 "
            f"(per cent), got {wrong}"
        )
