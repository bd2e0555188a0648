"""The cluster's secret: the file's checks, the one switch, and what the SparkConf keeps."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from streaming_app.errors import ConfigError
from streaming_app.lifecycle.spark_secret import (
    AUTHENTICATE,
    ENV_SECRET,
    PLACEHOLDER,
    SECRET_KEY,
    SECURE_SPARK_CONF,
    is_placeholder,
    read_secret_file,
    secure_conf,
    verify_resolved,
    warn_secret_in_checkpoint,
)
from streaming_app.settings.loading import load_config

# An open that waits on a FIFO (the app's or a daemon's reading) fails a test, not hangs it.
pytestmark = pytest.mark.timeout(60)


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


def test_the_secret_is_the_first_line_without_the_spaces_around_it(tmp_path: Path) -> None:
    assert read_secret_file(_secret_file(tmp_path, text="  two words\t\nsecond line\n")) == (
        "two words"
    )


def test_a_link_is_followed_and_the_file_it_names_is_checked(tmp_path: Path) -> None:
    """As Kubernetes mounts a secret: a link (through ..data) to the file."""
    target = _secret_file(tmp_path, text="s3cret\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert read_secret_file(str(link)) == "s3cret"
    os.chmod(target, 0o644)
    with pytest.raises(ConfigError, match=r"spark_secret_file .*link: readable or writable"):
        read_secret_file(str(link))


def test_a_fifo_or_a_device_is_refused_without_waiting_or_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)  # no writer: a plain open would wait for one forever
    with pytest.raises(ConfigError, match=r"spark_secret_file .*fifo: not a regular file"):
        read_secret_file(str(fifo))
    with pytest.raises(ConfigError, match=r"spark_secret_file /dev/zero: not a regular file"):
        read_secret_file("/dev/zero")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = _secret_file(tmp_path)
    os.chown(path, 65534, 65534)  # nobody
    with pytest.raises(ConfigError, match=r"owned by uid 65534, not by the user the app runs"):
        read_secret_file(path)


def test_a_first_line_too_long_or_blank_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"first line is over 65536 bytes"):
        read_secret_file(_secret_file(tmp_path, text="x" * 70_000))
    with pytest.raises(ConfigError, match=r"empty, or its first line blank"):
        read_secret_file(_secret_file(tmp_path, text="   \nthe secret on line two\n"))


ROOT = Path(__file__).resolve().parents[3]
SPARK_ENV = ROOT / "conf" / "secure" / "spark-env.sh"


def _source_spark_env(env: dict[str, str], cwd: Path | None = None) -> tuple[int, str, str]:
    """Source conf/secure/spark-env.sh as Spark's scripts do, in a session of its own: its
    exit code, the secret it exports, its stderr. An AssertionError if it does not end in
    10 s (its whole session killed: a reader stuck on a FIFO holds the pipes open)."""
    with subprocess.Popen(
        ["bash", "-c", f'set -a; . "{SPARK_ENV}"; printf %s "$_SPARK_AUTH_SECRET"'],
        env={"PATH": os.environ["PATH"], **env},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError("spark-env.sh hung reading the secret file") from None
    return proc.returncode, out, err


def spark_env_secret(path: str) -> tuple[int, str, str]:
    """spark-env.sh with the secret file `path`, the app's Python running its reader."""
    return _source_spark_env(
        {
            "STREAMING_APP_SPARK_SECRET_FILE": path,
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": str(ROOT),
        }
    )


@pytest.mark.parametrize(
    "text", ["s3cret\n", "  two words\t\r\nline two\n", "no newline", "ünïcode ✓\n"]
)
def test_the_daemons_read_the_secret_as_the_app_does(tmp_path: Path, text: str) -> None:
    path = _secret_file(tmp_path, text=text)
    link = tmp_path / "link"
    link.symlink_to(path)
    for name in (path, str(link)):
        assert spark_env_secret(name) == (0, read_secret_file(name), "")


@pytest.mark.parametrize(
    ("case", "refusal"),
    [
        ("empty", "empty, or its first line blank"),
        ("blank-first-line", "empty, or its first line blank"),
        ("group-readable", "readable or writable by others"),
        ("fifo", "not a regular file"),
        ("missing", "cannot read it (No such file or directory)"),
        ("other-owner", "owned by uid 65534"),
    ],
)
def test_the_daemons_refuse_what_the_app_refuses_in_one_line(
    tmp_path: Path, case: str, refusal: str
) -> None:
    path = str(tmp_path / case)
    if case == "empty":
        _secret_file(tmp_path, text="")
        path = str(tmp_path / "spark-secret")
    elif case == "blank-first-line":
        path = _secret_file(tmp_path, text=" \t\nsecret on line two\n")
    elif case == "group-readable":
        path = _secret_file(tmp_path, mode=0o640)
    elif case == "fifo":
        os.mkfifo(path, 0o600)
    elif case == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        path = _secret_file(tmp_path)
        os.chown(path, 65534, 65534)
    code, secret, stderr = spark_env_secret(path)
    assert (code, secret) == (2, ""), stderr
    assert stderr.count("\n") == 1 and refusal in stderr, stderr
    with pytest.raises(ConfigError):
        read_secret_file(path)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4, 3]", "yarn"])
def test_where_spark_makes_its_own_secret_the_file_is_said_unused_in_one_line(
    tmp_path: Path, master: str, caplog: pytest.LogCaptureFixture
) -> None:
    conf = _Conf({"spark.master": master})
    with caplog.at_level(logging.INFO):
        assert secure_conf(conf, _secret_file(tmp_path)) is None  # nothing to hold
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"spark_secret_file is not used with master {master}: Spark makes")
    assert conf[AUTHENTICATE] == "true" and SECRET_KEY not in conf
    assert "s3cr3t-value" not in repr(conf) + line
    # An unsafe file is refused all the same: the same settings may go to a cluster next.
    with pytest.raises(ConfigError, match="readable or writable by others"):
        secure_conf(_Conf({"spark.master": master}), _secret_file(tmp_path, mode=0o644))


def test_local_cluster_holds_the_files_secret_as_a_standalone_master_does(tmp_path: Path) -> None:
    """Spark's test cluster runs its master and workers in the driver's JVM: they read the
    same credentials (run end to end with authentication, 2026-11-28)."""
    conf = _Conf({"spark.master": "local-cluster[1,1,1024]"})
    assert secure_conf(conf, _secret_file(tmp_path)) == "s3cr3t-value"
    assert conf[SECRET_KEY] == PLACEHOLDER


def test_on_kubernetes_the_file_becomes_sparks_own_file_setting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _secret_file(tmp_path)
    conf = _Conf({"spark.master": "k8s://https://kube:6443"})
    with caplog.at_level(logging.INFO):
        assert secure_conf(conf, path) is None  # nothing for the credentials
    assert conf["spark.authenticate.secret.file"] == path
    assert conf[AUTHENTICATE] == "true" and SECRET_KEY not in conf
    assert "mount it there" in caplog.text and "s3cr3t-value" not in caplog.text
    # Settings of the operator's own for the pods' files are kept as they are.
    own = _Conf({"spark.master": "k8s://x", "spark.authenticate.secret.driver.file": "/d"})
    secure_conf(own, path)
    assert "spark.authenticate.secret.file" not in own
    # Without a file Spark makes a secret per application there: no refusal.
    assert secure_conf(_Conf({"spark.master": "k8s://x", AUTHENTICATE: "true"}), None) is None
    # A secret as a setting would be written into every checkpoint: refused.
    with pytest.raises(ConfigError, match="on Kubernetes give the secret as a file"):
        secure_conf(_Conf({"spark.master": "k8s://x", SECRET_KEY: "in-conf"}), None)


def test_a_standalone_master_takes_the_files_secret_for_the_credentials(tmp_path: Path) -> None:
    conf = _Conf({"spark.master": "spark://m1:7077,m2:7077"})
    assert secure_conf(conf, _secret_file(tmp_path)) == "s3cr3t-value"
    assert conf[SECRET_KEY] == PLACEHOLDER


class _Chain:
    """Any attribute, any call: itself; what verify_resolved reads comes from `answers`."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def __getattr__(self, name: str) -> Any:
        if name in self.answers:
            value = self.answers[name]
            return lambda *_: value
        return self

    def __call__(self, *args: Any) -> Any:
        return self


def _jvm(lookup_key: str = "sparkCookie", held: bytes | None = b"s3cr3t-value") -> Any:
    """A JVM whose SecurityManager looks under `lookup_key`, whose credentials hold `held`."""
    return _Chain({"toString": lookup_key, "getSecretKey": held})


def test_the_secret_spark_takes_is_checked_after_the_start() -> None:
    verify_resolved(_jvm(), "s3cr3t-value", "/etc/secret")  # the same: nothing
    cases = [
        (_jvm(held=b"one-spark-made"), "the secret Spark holds is not spark_secret_file"),
        (_jvm(held=None), "the secret Spark holds is not spark_secret_file"),
        (_jvm(lookup_key="sparkSecret"), "Spark looks for its secret under 'sparkSecret'"),
    ]
    for jvm, said in cases:
        with pytest.raises(ConfigError) as caught:
            verify_resolved(jvm, "s3cr3t-value", "/etc/secret")
        assert said in str(caught.value)
        assert "s3cr3t-value" not in str(caught.value) and "one-spark" not in str(caught.value)


def test_a_spark_without_the_lookup_is_one_line() -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("no such member")

    with pytest.raises(ConfigError, match="cannot tell where Spark looks for its secret"):
        verify_resolved(Broken(), "s3cr3t-value", "/etc/secret")


def test_the_placeholder_is_new_each_run_and_still_reads_as_one() -> None:
    import subprocess
    import sys

    code = "from streaming_app.lifecycle.spark_secret import PLACEHOLDER; print(PLACEHOLDER)"
    runs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        for _ in range(2)
    }
    assert len(runs) == 2 and all(len(run.strip()) > 30 for run in runs)
    assert is_placeholder(PLACEHOLDER) and is_placeholder("********") and is_placeholder("***")
    assert not is_placeholder("hunter2") and not is_placeholder("****x")


def test_a_fifo_swapped_in_for_the_file_never_hangs_a_daemon(tmp_path: Path) -> None:
    """The file and a FIFO swapped under the name as fast as a thread can, while the
    daemon's script reads it again and again: each read ends at once, with the secret or
    'not a regular file', and never waits on the FIFO (a name checked and then opened
    again would: the open of a FIFO waits for a writer)."""
    name = tmp_path / "spark-secret"
    (tmp_path / "r").mkdir()
    regular = Path(_secret_file(tmp_path / "r", text="s3cret\n"))
    fifo = tmp_path / "fifo"
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            os.link(regular, tmp_path / "next")
            os.replace(tmp_path / "next", name)
            os.mkfifo(fifo, 0o600)
            os.replace(fifo, name)
            swaps += 1

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    seen: set[str] = set()
    try:
        for _ in range(40):
            code, secret, stderr = spark_env_secret(str(name))  # times out if it hangs
            seen.add(secret if code == 0 else stderr.split(": ")[-1].strip())
    finally:
        stop.set()
        swapper.join()
    assert swaps > 40
    assert seen <= {"s3cret", "not a regular file"}, seen


def test_the_daemons_need_a_python_with_the_app(tmp_path: Path) -> None:
    path = _secret_file(tmp_path)
    code, secret, stderr = _source_spark_env(
        {
            "STREAMING_APP_SPARK_SECRET_FILE": path,
            "STREAMING_APP_PYTHON": "/usr/bin/python3",  # the system's, without the app
        },
        cwd=tmp_path,  # not the checkout, which a Python would import the app from
    )
    assert (code, secret) == (2, "")
    assert stderr == (
        f"spark-env.sh: STREAMING_APP_SPARK_SECRET_FILE {path}: cannot check it: "
        "/usr/bin/python3 has no streaming_app; set STREAMING_APP_PYTHON to a Python that "
        "has the app installed\n"
    )


@pytest.mark.parametrize("master", ["local", "local[2]", "yarn"])
@pytest.mark.parametrize("way", ["environment", "setting"])
def test_where_spark_makes_its_own_secret_a_secret_given_otherwise_is_said_unused(
    master: str, way: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Authentication on, a secret in the environment or in spark-defaults.conf: Spark
    makes its own there. One line says so; nothing to hold or verify (which would end the
    run with 'Spark replaced it'), and the setting's value is kept out of the conf."""
    conf = _Conf({"spark.master": master, AUTHENTICATE: "true"})
    if way == "environment":
        monkeypatch.setenv(ENV_SECRET, "from-the-environment")
    else:
        conf[SECRET_KEY] = "from-spark-defaults"
    with caplog.at_level(logging.INFO):
        assert secure_conf(conf, None) is None
    [line] = [r.getMessage() for r in caplog.records]
    name = ENV_SECRET if way == "environment" else SECRET_KEY
    assert line.startswith(f"{name} is not used with master {master}: Spark makes")
    assert "from-" not in repr(conf) + line
    # Its positive control: on a standalone master the same secret is the one held.
    conf = _Conf({"spark.master": "spark://m:7077", AUTHENTICATE: "true"})
    if way == "setting":
        conf[SECRET_KEY] = "from-spark-defaults"
    assert (
        secure_conf(conf, None)
        == f"from-{'the-environment' if way == 'environment' else 'spark-defaults'}"
    )
