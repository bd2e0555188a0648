"""The command line through click's CliRunner: usage errors, `totals`, `--help`; no JVM."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import streaming_app.dstream.run as run_module
import streaming_app.dstream.startup as startup_module
from streaming_app import __version__
from streaming_app.cli.main import cli


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No stray STREAMING_APP_* variables, no JVM, and the root logger restored afterwards."""
    for name in list(os.environ):
        if name.startswith("STREAMING_APP_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

    def no_jvm(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a unit test got as far as starting Spark")

    # run() must fail before these; if it ever gets here, the test fails instead of a JVM.
    monkeypatch.setattr(run_module, "prepare_spark_env", no_jvm)
    monkeypatch.setattr(startup_module, "get_or_create", no_jvm)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env or {})


def assert_usage_error(result: Result, *fragments: str) -> str:
    """Exit 2 with exactly one `Error: ...` line on stderr, naming the fragments."""
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def blocked(tmp_path: Path) -> Path:
    """A regular file: nothing can be created below it, not even by root."""
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    return path


# --- run: bad settings --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--port", "abc"], "--port"),
        (["--port", "70000"], "--port"),
        (["--batch-interval", "0"], "--batch-interval"),
        (["--batch-interval", "0.0001"], "--batch-interval"),
        (["--batch-interval", "2", "--checkpoint-interval", "3"], "--checkpoint-interval"),
        (["--duration", "-5"], "--duration"),
        (["--top-n", "0"], "--top-n"),
        (["--host", " "], "--host"),
        (["--spark-conf", "ui.enabled=false"], "--spark-conf"),
        (["--sink", "files"], "--output-dir"),
        (["--source", "files"], "--input-dir"),
    ],
)
def test_bad_flag_value_is_a_one_line_usage_error(args: list[str], flag: str) -> None:
    assert_usage_error(invoke("run", *args), flag)


def test_every_problem_is_in_the_one_line() -> None:
    result = invoke("run", "--port", "0", "--top-n", "0", "--batch-interval", "x")
    assert_usage_error(result, "--port", "--top-n", "--batch-interval")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--source", "ftp"], "'--source'"),
        (["--log-level", "loud"], "'--log-level'"),
        (["--engine", "flink"], "'--engine'"),
    ],
)
def test_choice_flags_are_checked_by_click(args: list[str], flag: str) -> None:
    result = invoke("run", *args)
    assert result.exit_code == 2
    assert f"Error: Invalid value for {flag}" in result.stderr
    assert "Traceback" not in result.output


def test_unknown_option_exits_2() -> None:
    result = invoke("run", "--bogus", "1")
    assert result.exit_code == 2
    assert "Error: No such option '--bogus'" in result.stderr
    assert "Traceback" not in result.output


def test_env_values_are_checked() -> None:
    result = invoke("run", env={"STREAMING_APP_PORT": "abc"})
    assert_usage_error(result, "environment STREAMING_APP_PORT", "'abc' is not an integer")


def test_a_wrong_kafka_give_up_after_exits_2_naming_the_key(tmp_path: Path) -> None:
    ini = tmp_path / "app.ini"
    ini.write_text("[kafka]\nkafka_give_up_after = 0\n", encoding="utf-8")
    result = invoke("run", "--source", "kafka", "--topics", "t", "--config", str(ini))
    assert_usage_error(result, f"{ini} [kafka] kafka_give_up_after: must be a positive number")


def test_unknown_env_var_is_rejected() -> None:
    result = invoke("run", env={"STREAMING_APP_PROT": "1"})
    assert_usage_error(result, "STREAMING_APP_PROT: unknown setting")


def test_config_file_problems_name_the_file(tmp_path: Path) -> None:
    ini = tmp_path / "bad.ini"
    ini.write_text("[app]\nbogus = 1\n")
    assert_usage_error(invoke("run", "--config", str(ini)), f"{ini} [app] bogus")
    env = {"STREAMING_APP_CONFIG": str(ini)}
    assert_usage_error(invoke("run", env=env), f"{ini} [app] bogus")


def test_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.ini"
    assert_usage_error(invoke("run", "--config", str(path)), str(path))


def test_unwritable_checkpoint_dir_exits_2_before_spark(blocked: Path) -> None:
    checkpoint = blocked / "checkpoint"
    result = invoke("run", "--checkpoint-dir", str(checkpoint))
    assert_usage_error(result, "checkpoint_dir", str(checkpoint), "not writable")


def test_unwritable_output_dir_exits_2_before_spark(tmp_path: Path, blocked: Path) -> None:
    output = blocked / "out"
    args = [
        "--checkpoint-dir",
        str(tmp_path / "ck"),
        "--sink",
        "files",
        "--output-dir",
        str(output),
    ]
    assert_usage_error(invoke("run", *args), "output_dir", str(output), "not writable")


def test_cli_flag_overrides_a_bad_env_value(blocked: Path) -> None:
    # The env port is invalid but the flag wins, so the run gets as far as the checkpoint dir.
    args = ["--port", "5000", "--checkpoint-dir", str(blocked / "ck")]
    line = assert_usage_error(invoke("run", *args, env={"STREAMING_APP_PORT": "abc"}))
    assert "checkpoint_dir" in line
    assert "PORT" not in line


# --- run --help ---------------------------------------------------------------------------


def test_run_help_lists_the_env_vars() -> None:
    result = invoke("run", "--help")
    assert result.exit_code == 0
    for name in [
        "CONFIG",
        "SOURCE",
        "HOST",
        "PORT",
        "INPUT_DIR",
        "CHECKPOINT_DIR",
        "BATCH_INTERVAL",
        "CHECKPOINT_INTERVAL",
        "SINKS",
        "OUTPUT_DIR",
        "MASTER",
        "DURATION",
        "TOP_N",
        "LOG_LEVEL",
        "BOOTSTRAP_SERVERS",
        "TOPICS",
        "STARTING_OFFSETS",
        "MAX_RATE_PER_PARTITION",
        "GROUP_ID",
        "ON_OFFSET_OUT_OF_RANGE",
        "MAX_VALUE_BYTES",
        "ON_INCOMPATIBLE_CHECKPOINT",
        "RESTORE_FROM_SNAPSHOT",
        "SNAPSHOT_INTERVAL",
        "SNAPSHOT_DIR",
        "SNAPSHOT_KEEP",
        "POSTGRES_TABLE",
    ]:
        assert f"STREAMING_APP_{name}" in result.stdout
    # Credentials have no flags: a password on a command line is visible to `ps`.
    assert "password" not in result.stdout.lower()


def test_run_help_groups_every_option_and_shows_every_default() -> None:
    from streaming_app.cli.options import OPTION_GROUPS
    from streaming_app.cli.run import run

    grouped = [name for names in OPTION_GROUPS.values() for name in names]
    assert len(grouped) == len(set(grouped)), "an option in two sections"
    options = {p.name for p in run.params}
    assert options == set(grouped), options ^ set(grouped)  # none left ungrouped
    text = invoke("run", "--help").stdout
    positions = [text.index(f"\n{title}:\n") for title in OPTION_GROUPS]
    assert positions == sorted(positions)  # the sections, in order
    assert text.rstrip().endswith("-h, --help  Show this message and exit.")
    # Every option whose setting has a default says it (the text wraps: compare flat).
    flat = " ".join(text.split())
    flags = {p.name: p.opts[0] for p in run.params}
    for name in sorted(options):  # an unset default says none; --spark-conf has no env
        after = flat[flat.index(flags[name] + " ") :]
        assert "[default: " in after[: after.index("[env: ")], name
    for flag, default in [
        ("--input-dir", "none"), ("--window", "none"), ("--spark-conf", "none"),
        ("--batch-interval", "1"), ("--stop-timeout", "30"), ("--host", "127.0.0.1"),
        ("--port", "9999"), ("--metrics-host", "127.0.0.1"), ("--sink", "console"),
        ("--slide", "batch_interval"), ("--duration", "never"),
    ]:  # fmt: skip
        after = flat[flat.index(flag + " ") :]
        assert f"[default: {default}]" in after[: after.index("[env: ")], flag


def test_the_command_list_gives_each_description_whole() -> None:
    text = invoke("--help").stdout
    assert "..." not in text[text.index("Commands:") :]
    flat = " ".join(text.split())
    assert (
        "Run the streaming word count; resumes from the checkpoint directory if one exists." in flat
    )


def test_postgres_dsn_problems_never_show_the_password() -> None:
    env = {"STREAMING_APP_POSTGRES_DSN": "postgresql://u:s3cret@127.0.0.1/db"}
    result = invoke("run", "--sink", "postgres", "--postgres-table", "no-dashes", env=env)
    line = assert_usage_error(result, "--postgres-table")
    assert "s3cret" not in line


def test_restore_from_a_path_without_snapshots_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke(
        "run", "--source", "files", "--input-dir", str(tmp_path / "in"),
        "--checkpoint-dir", str(tmp_path / "new"), "--restore-from-snapshot", str(tmp_path),
    )  # fmt: skip
    assert_usage_error(result, f"restore_from_snapshot {tmp_path}: no snapshot there")


def test_kafka_without_topics_is_a_usage_error_before_spark() -> None:
    assert_usage_error(invoke("run", "--source", "kafka"), "topics: required by the kafka source")


def test_kafka_password_problems_never_show_the_password() -> None:
    env = {
        "STREAMING_APP_SECURITY_PROTOCOL": "bogus",
        "STREAMING_APP_SASL_PLAIN_PASSWORD": "s3cret",
    }
    result = invoke("run", "--source", "kafka", "--topics", "t", env=env)
    line = assert_usage_error(result, "STREAMING_APP_SECURITY_PROTOCOL")
    assert "s3cret" not in line


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["produce"], "Missing option '--topic'"),
        (["produce", "--topic", "t", "--rate", "-1"], "--rate"),
        (["produce", "--topic", "t", "--file", "/no/such/file"], "--file"),
        (["produce", "--topic", "t", "--count", "0"], "--count"),
        (["dev-broker", "--port", "70000"], "--port"),
    ],
)
def test_produce_and_dev_broker_usage_errors(args: list[str], fragment: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert __version__ in result.stdout


# --- totals -------------------------------------------------------------------------------


@pytest.fixture
def output_dir(tmp_path: Path) -> Path:
    """A hand-made files-sink output: one complete batch, one newer incomplete one."""
    out = tmp_path / "out"
    done = out / "totals-1763805601000"
    done.mkdir(parents=True)
    (done / "part-00000").write_text("rabbit\t3\nalice\t5\n")
    (done / "part-00001").write_text("Bob\t1\nwatch\t2\n")
    (done / "_SUCCESS").write_text("")
    partial = out / "totals-1763805602000"
    partial.mkdir()
    (partial / "part-00000").write_text("alice\t6\n")
    return out


EXPECTED_TOTALS = "Bob\t1\nalice\t5\nrabbit\t3\nwatch\t2\n"


def test_totals_prints_sorted_word_tab_count_lines(output_dir: Path) -> None:
    result = invoke("totals", "--output-dir", str(output_dir))
    assert result.exit_code == 0, result.output
    assert result.stdout == EXPECTED_TOTALS


def test_totals_reads_the_output_dir_from_env(output_dir: Path) -> None:
    result = invoke("totals", env={"STREAMING_APP_OUTPUT_DIR": str(output_dir)})
    assert result.exit_code == 0, result.output
    assert result.stdout == EXPECTED_TOTALS


def test_totals_flag_beats_env(output_dir: Path, tmp_path: Path) -> None:
    env = {"STREAMING_APP_OUTPUT_DIR": str(tmp_path / "absent")}
    result = invoke("totals", "--output-dir", str(output_dir), env=env)
    assert result.stdout == EXPECTED_TOTALS


def test_totals_of_a_missing_dir_exits_2(tmp_path: Path) -> None:
    result = invoke("totals", "--output-dir", str(tmp_path / "absent"))
    assert result.exit_code == 2
    assert "Error: Invalid value for '--output-dir'" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_totals_without_an_output_dir_exits_2() -> None:
    result = invoke("totals")
    assert result.exit_code == 2
    assert "Missing option '--output-dir'" in result.stderr


def test_totals_before_the_first_batch_says_so(tmp_path: Path) -> None:
    result = invoke("totals", "--output-dir", str(tmp_path))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert f"no totals in {tmp_path} yet" in result.stderr


def test_totals_of_a_malformed_part_is_a_one_line_error(output_dir: Path) -> None:
    (output_dir / "totals-1763805601000" / "part-00002").write_text("broken line\n")
    result = invoke("totals", "--output-dir", str(output_dir))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ")
    assert "part-00002:1: malformed line" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_totals_help_shows_its_env_var() -> None:
    assert "STREAMING_APP_OUTPUT_DIR" in invoke("totals", "--help").stdout


def test_the_checkpoint_commands_run_as_a_module_and_list_their_lines_whole() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "streaming_app.cli.checkpoint", "scrub", "--help"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Remove the cluster's secret" in done.stdout
    listing = invoke("checkpoint", "--help").stdout
    assert "..." not in listing[listing.index("Commands:") :]
