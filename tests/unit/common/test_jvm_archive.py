"""The driver JVM's class archive: when a launch uses it, and what the JVM alone gets."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from streaming_app.common import jvm_archive
from streaming_app.common.spark_env import repo_conf_dir

REPO_CONF = repo_conf_dir()
COMMAND = ["/spark/bin/spark-submit", "--master", "local[2]", "pyspark-shell"]


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An archive file where the app looks for one (its content does not matter here)."""
    monkeypatch.delenv(jvm_archive.ENV, raising=False)
    monkeypatch.setattr(jvm_archive, "archive_dir", lambda: tmp_path / "share")
    path = tmp_path / "share" / "spark-driver-0.jsa"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    monkeypatch.setattr(jvm_archive, "archive_path", lambda: path)
    return path


def test_the_repositorys_conf_launches_from_the_archive_with_its_files_by_option(
    archive: Path,
) -> None:
    assert REPO_CONF is not None
    env = {"SPARK_CONF_DIR": REPO_CONF, "OTHER": "kept"}
    command, jvm_env = jvm_archive.launch(COMMAND, env, REPO_CONF)
    assert command[:3] == COMMAND[:3] and command[-1] == "pyspark-shell"
    options = command[3:-1]
    assert options[:2] == ["--properties-file", f"{REPO_CONF}/spark-defaults.conf"]
    assert options[2] == "--driver-java-options"
    java = shlex.split(options[3])
    assert f"-XX:SharedArchiveFile={archive}" in java
    assert f"-Dlog4j2.configurationFile=file://{REPO_CONF}/log4j2.properties" in java
    assert "-Xlog:cds=off" in java  # a JVM that cannot use it says nothing and goes on
    empty = Path(jvm_env["SPARK_CONF_DIR"])
    assert empty.is_dir() and not any(empty.iterdir()) and empty != Path(REPO_CONF)
    assert jvm_env["OTHER"] == "kept"
    assert env == {"SPARK_CONF_DIR": REPO_CONF, "OTHER": "kept"}  # the caller's is untouched


@pytest.mark.usefixtures("archive")
def test_a_launch_it_does_not_suit_is_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert REPO_CONF is not None
    own = tmp_path / "own-conf"
    shutil.copytree(REPO_CONF, own)
    cases = {
        "a conf directory of the user's own": (COMMAND, {"SPARK_CONF_DIR": str(own)}, REPO_CONF),
        "no conf directory": (COMMAND, {}, REPO_CONF),
        "not PySpark's shell": (COMMAND[:-1], {"SPARK_CONF_DIR": REPO_CONF}, REPO_CONF),
    }
    for case, (command, env, repo) in cases.items():
        assert jvm_archive.launch(command, env, repo) == (command, env), case
    # A file the empty conf directory would lose (a user's metrics.properties, say).
    (own / "metrics.properties").write_text("*.sink.console.class=x\n")
    env = {"SPARK_CONF_DIR": str(own)}
    assert jvm_archive.launch(COMMAND, env, str(own)) == (COMMAND, env)
    (own / "metrics.properties").unlink()
    assert jvm_archive.launch(COMMAND, env, str(own)) != (COMMAND, env)  # the control
    # Driver options or a class path in spark-defaults.conf, which the launch would lose.
    defaults = own / "spark-defaults.conf"
    kept = defaults.read_text()
    for key in ("spark.driver.extraJavaOptions", "spark.driver.extraClassPath"):
        defaults.write_text(f"{kept}{key}  -Dx=1\n")
        assert jvm_archive.launch(COMMAND, env, str(own)) == (COMMAND, env), key
    defaults.write_text(kept)
    monkeypatch.setenv(jvm_archive.ENV, "0")
    assert jvm_archive.launch(COMMAND, env, str(own)) == (COMMAND, env)


def test_no_archive_file_no_change(archive: Path) -> None:
    assert REPO_CONF is not None
    archive.unlink()
    env = {"SPARK_CONF_DIR": REPO_CONF}
    assert jvm_archive.launch(COMMAND, env, REPO_CONF) == (COMMAND, env)


def test_the_archive_is_named_for_the_jdk_and_pyspark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm_archive, "archive_dir", lambda: tmp_path)
    first = jvm_archive.archive_path()
    assert first is not None and first.parent == tmp_path and first.suffix == ".jsa"
    assert jvm_archive.archive_path() == first
    other_java = tmp_path / "java"
    other_java.write_text("#!/bin/sh\n")
    monkeypatch.setattr(jvm_archive, "java_binary", lambda: str(other_java))
    assert jvm_archive.archive_path() not in (None, first)
    monkeypatch.setattr(jvm_archive, "java_binary", lambda: None)
    assert jvm_archive.archive_path() is None


def test_the_command_line_wants_the_conf_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in ([], ["--force"], [str(tmp_path)], [str(REPO_CONF), "--fast"]):
        assert jvm_archive.main(argv) == 2, argv
        usage = "usage: python -m streaming_app.common.jvm_archive CONF_DIR"
        assert usage in capsys.readouterr().err


def test_the_command_line_takes_a_relative_conf_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`python -m streaming_app.common.jvm_archive conf`, as docs/operations.md has it,
    from the repository's root: the build gets the absolute path (a file URI needs one)."""
    built = []
    monkeypatch.setattr(jvm_archive, "build", lambda conf, force: built.append((conf, force)))
    monkeypatch.chdir(Path(REPO_CONF).parent)
    assert jvm_archive.main(["conf", "--force"]) == 0
    assert built == [(str(Path(REPO_CONF).resolve()), True)]


def test_the_users_driver_java_options_are_kept_before_the_archives(archive: Path) -> None:
    assert REPO_CONF is not None
    given = ["--conf", "spark.driver.extraJavaOptions=-Dmine=1 -XX:+UseSerialGC"]
    command = [COMMAND[0], *given, "--conf", "spark.ui.enabled=false", *COMMAND[1:]]
    launched, _ = jvm_archive.launch(command, {"SPARK_CONF_DIR": REPO_CONF}, REPO_CONF)
    assert not any(arg.startswith("spark.driver.extraJavaOptions") for arg in launched)
    assert launched[1:5] == ["--conf", "spark.ui.enabled=false", "--master", "local[2]"]
    java = shlex.split(launched[launched.index("--driver-java-options") + 1])
    assert java[:2] == ["-Dmine=1", "-XX:+UseSerialGC"]
    assert f"-XX:SharedArchiveFile={archive}" in java


def test_java_options_in_pyspark_submit_args_are_kept_not_replaced(archive: Path) -> None:
    assert REPO_CONF is not None
    command = [COMMAND[0], "--driver-java-options", "-Dtheirs=1", *COMMAND[1:]]
    launched, _ = jvm_archive.launch(command, {"SPARK_CONF_DIR": REPO_CONF}, REPO_CONF)
    assert launched.count("--driver-java-options") == 1
    java = shlex.split(launched[launched.index("--driver-java-options") + 1])
    assert java[0] == "-Dtheirs=1"
    assert f"-XX:SharedArchiveFile={archive}" in java


def test_a_properties_file_in_pyspark_submit_args_launches_without_the_archive(
    archive: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert REPO_CONF is not None
    command = [COMMAND[0], "--properties-file", "/etc/theirs.conf", *COMMAND[1:]]
    env = {"SPARK_CONF_DIR": REPO_CONF}
    with caplog.at_level("INFO"):
        assert jvm_archive.launch(command, env, REPO_CONF) == (command, env)
    assert "class archive is not used: PYSPARK_SUBMIT_ARGS names --properties-file" in caplog.text


def test_a_subdirectory_of_the_conf_directory_does_not_turn_the_archive_off(
    archive: Path,
) -> None:
    assert REPO_CONF is not None
    assert (Path(REPO_CONF) / "secure").is_dir()  # conf/secure/, which Spark does not read
    assert jvm_archive.usable_archive(REPO_CONF, REPO_CONF) == archive
