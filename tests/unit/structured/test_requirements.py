"""What `--engine structured` checks before Spark: the extra, and the settings of this slice."""

from __future__ import annotations

import pytest

from streaming_app.errors import EXIT_USAGE, ConfigError
from streaming_app.settings.loading import load_config
from streaming_app.structured.requirements import (
    INSTALL,
    check_supported,
    missing_packages,
    require_extra,
    unsupported,
)

INSTALLED = {"pandas": "2.3.1", "pyarrow": "21.0.0"}


def test_the_installed_extra_is_complete() -> None:
    assert missing_packages() == []
    assert missing_packages(INSTALLED) == []


@pytest.mark.parametrize(
    ("changed", "missing"),
    [
        ({"pandas": None}, ["pandas"]),
        ({"pyarrow": "17.0.0"}, ["pyarrow 17.0.0"]),
        ({"pandas": "3.1.1"}, ["pandas 3.1.1"]),
        ({"pandas": None, "pyarrow": None}, ["pandas", "pyarrow"]),
    ],
)
def test_absent_or_unsupported_packages_are_named(
    changed: dict[str, str | None], missing: list[str]
) -> None:
    assert missing_packages({**INSTALLED, **changed}) == missing


def test_a_missing_extra_is_a_usage_error_naming_the_install_command() -> None:
    with pytest.raises(ConfigError) as info:
        require_extra({**INSTALLED, "pyarrow": None})
    assert info.value.exit_code == EXIT_USAGE
    assert INSTALL == "pip install 'streaming-app[structured]'"
    assert str(info.value).endswith(INSTALL)
    assert "pyarrow" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("sinks", ["files,console", "postgres", "postgres,files,console"])
def test_the_slice_runs_files_console_and_postgres(sinks: str) -> None:
    config = load_config(
        None,
        cli={"source": "files", "input_dir": "in", "sinks": sinks, "output_dir": "out"},
    )
    assert unsupported(config) == []
    check_supported(config)


def test_what_the_engine_does_not_run_is_named() -> None:
    config = load_config(
        None,
        cli={
            "source": "socket",
            "sinks": "postgres,files",
            "postgres_table": "stats.word_totals",
            "output_dir": "hdfs://nn/out",
            "window": "4",
            "metrics_file": "m.jsonl",
        },
    )
    with pytest.raises(ConfigError) as info:
        check_supported(config)
    message = str(info.value)
    assert "window with the socket source" in message
    assert "hdfs://nn/out" not in message  # bases are written by the executors
    assert "postgres" not in message  # the structured engine writes to PostgreSQL
    assert "metrics_file" not in message  # and writes the metrics file
    assert info.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("source", ["files", "kafka"])
def test_windows_run_on_replayable_sources(source: str) -> None:
    cli = {"source": source, "input_dir": "in", "topics": "t", "window": "4", "slide": "2"}
    assert unsupported(load_config(None, cli=cli)) == []
