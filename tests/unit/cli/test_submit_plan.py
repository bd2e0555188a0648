"""scripts/submit.sh's choice of how the executors get the code: every way of turning
authentication on gives the secured deployment (`installed`: nothing shipped through the
driver's file server, the app's worker daemon)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.cli.submit_plan import main, plan

ROOT = Path(__file__).resolve().parents[3]


def _secret(tmp_path: Path) -> str:
    path = tmp_path / "spark-secret"
    path.write_text("s3cret\n")
    path.chmod(0o600)
    return str(path)


def _ways(tmp_path: Path) -> dict[str, tuple[list[str], list[str], dict[str, str]]]:
    """Each documented way: spark-submit's arguments, the run's, the environment."""
    secret = _secret(tmp_path)
    config = tmp_path / "app.ini"
    config.write_text(f"[security]\nspark_secret_file = {secret}\n")
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.authenticate   true\n")
    properties = tmp_path / "props.conf"
    properties.write_text("spark.authenticate=true\n")
    return {
        "environment": ([], [], {"STREAMING_APP_SPARK_SECRET_FILE": secret}),
        "flag": ([], ["--spark-secret-file", secret], {}),
        "config file": ([], ["--config", str(config)], {}),
        "spark-defaults.conf": ([], [], {"SPARK_CONF_DIR": str(conf_dir)}),
        "conf/secure": ([], [], {"SPARK_CONF_DIR": str(ROOT / "conf" / "secure")}),
        "--spark-conf": ([], ["--spark-conf", "spark.authenticate=true"], {}),
        "spark-submit --conf": (["--conf", "spark.authenticate=true"], [], {}),
        "--properties-file": (["--properties-file", str(properties)], [], {}),
    }


WAYS = [
    "environment",
    "flag",
    "config file",
    "spark-defaults.conf",
    "conf/secure",
    "--spark-conf",
    "spark-submit --conf",
    "--properties-file",
]


@pytest.mark.parametrize("way", WAYS)
def test_every_way_of_turning_authentication_on_ships_no_code(tmp_path: Path, way: str) -> None:
    submit_args, run_args, env = _ways(tmp_path)[way]
    code, why = plan(submit_args, run_args, env)
    assert code == "installed", why


def test_without_authentication_the_code_is_shipped(tmp_path: Path) -> None:
    # The positive control of the probe above: the same plan ships the zip when nothing
    # turns authentication on (the repository's conf/, spark.authenticate false).
    assert plan([], [], {"SPARK_CONF_DIR": str(ROOT / "conf")})[0] == "zip"
    off = tmp_path / "off.conf"
    off.write_text("spark.authenticate false\n")
    assert plan(["--properties-file", str(off)], [], {})[0] == "zip"


def test_the_choice_is_printed_and_a_bad_setting_is_the_apps_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMING_APP_SPARK_SECRET_FILE", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(ROOT / "conf"))
    assert main(["--master", "spark://m:7077", "--", "--spark-secret-file", _secret(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out == "installed\n"
    assert err == "==> spark_secret_file is set: STREAMING_APP_CODE=installed\n"
    assert main(["--", "--batch-interval", "soon"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("Error: --batch-interval") and err.count("\n") == 1
