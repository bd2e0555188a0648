"""The cluster's secret: the file's checks, the one switch, and what the SparkConf keeps."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from streaming_app.errors import ConfigError
from streaming_app.lifecycle.spark_secret import (
    ENV_SECRET,
    PLACEHOLDER,
    SECRET_KEY,
    SECURE_SPARK_CONF,
    read_secret_file,
    secure_conf,
    warn_secret_in_checkpoint,
)
from streaming_app.settings.loading import load_config


class _Conf(dict[str, str]):
    """The part of pyspark's SparkConf that secure_conf uses."""

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(key, default)

    def set(self, key: str, value: str) -> None:
        self[key] = value

    def setIfMissing(self, key: str, value: str) -> None:  # noqa: N802 (pyspark's name)
        self.setdefault(key, value)


def _secret_file(tmp_path: Path, text: str = "s3cr3t-value\n", mode: int = 0o600) -> str:
    path = tmp_path / "spark-secret"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


@pytest.fixture(autouse=True)
def _no_env_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SECRET, raising=False)


def test_a_secret_file_turns_everything_on_and_the_conf_keeps_only_a_placeholder(
    tmp_path: Path,
) -> None:
    conf = _Conf({"spark.master": "spark://m:7077"})
    assert secure_conf(conf, _secret_file(tmp_path)) == "s3cr3t-value"
    assert conf[SECRET_KEY] == PLACEHOLDER
    for key, value in SECURE_SPARK_CONF.items():
        assert conf[key] == value
    assert "s3cr3t-value" not in repr(conf)


def test_the_users_own_settings_win_over_the_switch(tmp_path: Path) -> None:
    conf = _Conf({"spark.master": "spark://m:7077", "spark.io.encryption.enabled": "false"})
    secure_conf(conf, _secret_file(tmp_path))
    assert conf["spark.io.encryption.enabled"] == "false"


def test_a_secret_in_spark_defaults_leaves_the_conf(tmp_path: Path) -> None:
    conf = _Conf({"spark.master": "spark://m:7077", "spark.authenticate": "true"})
    conf[SECRET_KEY] = "from-defaults"
    assert secure_conf(conf, None) == "from-defaults"
    assert conf[SECRET_KEY] == PLACEHOLDER
    # The file wins over a secret given elsewhere.
    conf[SECRET_KEY] = "from-defaults"
    assert secure_conf(conf, _secret_file(tmp_path)) == "s3cr3t-value"


def test_sparks_own_environment_variable_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SECRET, "from-env")
    conf = _Conf({"spark.master": "spark://m:7077", "spark.authenticate": "true"})
    assert secure_conf(conf, None) == "from-env"
    assert conf[SECRET_KEY] == PLACEHOLDER


def test_authentication_on_without_a_secret_is_one_line_naming_the_setting() -> None:
    conf = _Conf({"spark.master": "spark://m:7077", "spark.authenticate": "true"})
    with pytest.raises(ConfigError) as error:
        secure_conf(conf, None)
    assert "spark_secret_file" in str(error.value)
    assert "\n" not in str(error.value)
    # Where Spark makes a secret of its own, none is needed; without authentication neither.
    assert (
        secure_conf(_Conf({"spark.master": "local[2]", "spark.authenticate": "true"}), None) is None
    )
    assert secure_conf(_Conf({"spark.master": "spark://m:7077"}), None) is None


def test_a_secret_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"spark_secret_file .*readable or writable by others"):
        read_secret_file(_secret_file(tmp_path, mode=0o644))
    with pytest.raises(ConfigError, match=r"mode 0620"):
        read_secret_file(_secret_file(tmp_path, mode=0o620))


def test_a_missing_or_empty_secret_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"spark_secret_file .*cannot read it"):
        read_secret_file(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"spark_secret_file .*empty"):
        read_secret_file(_secret_file(tmp_path, text="\n"))
    os.mkdir(tmp_path / "dir")
    with pytest.raises(ConfigError, match=r"spark_secret_file"):
        read_secret_file(str(tmp_path / "dir"))


def test_a_secret_on_the_command_line_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(cli={"checkpoint_dir": "c"}, spark_conf=(f"{SECRET_KEY}=hunter2",))
    assert "--spark-secret-file" in str(error.value)
    assert "hunter2" not in str(error.value)


def test_a_checkpoint_holding_a_secret_is_said_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert warn_secret_in_checkpoint({SECRET_KEY: "real-one"}, "/ck")
        assert not warn_secret_in_checkpoint({SECRET_KEY: PLACEHOLDER}, "/ck")
        assert not warn_secret_in_checkpoint({SECRET_KEY: "*" * 31}, "/ck")  # scrubbed
        assert not warn_secret_in_checkpoint({}, "/ck")
    (record,) = caplog.records
    assert "streaming-app checkpoint scrub /ck" in record.getMessage()
    assert "real-one" not in record.getMessage()
