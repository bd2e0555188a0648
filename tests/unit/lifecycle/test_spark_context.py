"""The settings a run starts Spark with: defaults, the user's files, the engine's, the app's."""

from __future__ import annotations

import pytest

from streaming_app.common.jvm_jit import C1_ONLY, DRIVER_ONLY, ENV, EXECUTOR_OPTIONS
from streaming_app.lifecycle.spark_context import changed_settings, resolve_settings
from streaming_app.lifecycle.worker_daemon import DAEMON_MODULE, PRELOADED, STOCK
from streaming_app.settings.loading import load_config

FORCED = {"spark.ui.showConsoleProgress": ("false", "progress bars garble the console sink")}


def _config(*spark_conf: str):  # type: ignore[no-untyped-def]
    return load_config(cli={"checkpoint_dir": "c"}, spark_conf=spark_conf)


@pytest.mark.parametrize(
    ("master", "daemon"),
    [
        ("local[2]", PRELOADED),
        ("local", PRELOADED),
        # Executors may have the app only in the --py-files zip: Spark's own daemon.
        ("spark://127.0.0.1:7077", STOCK),
        ("yarn", STOCK),
    ],
)
def test_the_preloaded_worker_daemon_is_the_default_on_local_masters_only(
    master: str, daemon: str
) -> None:
    settings, _ = resolve_settings({"spark.master": master}, _config(), {}, FORCED)
    assert settings[DAEMON_MODULE] == daemon


def test_a_daemon_in_spark_defaults_or_the_apps_settings_wins() -> None:
    given = {"spark.master": "local[2]", DAEMON_MODULE: "mine.daemon"}
    assert resolve_settings(given, _config(), {}, FORCED)[0][DAEMON_MODULE] == "mine.daemon"
    own = _config(f"{DAEMON_MODULE}={STOCK}")
    assert (
        resolve_settings({"spark.master": "local[2]"}, own, {}, FORCED)[0][DAEMON_MODULE] == STOCK
    )


def test_the_engines_defaults_yield_to_the_users_files() -> None:
    defaults = {"spark.streaming.stopGracefullyOnShutdown": "true", "spark.x": "1"}
    given = {"spark.streaming.stopGracefullyOnShutdown": "false"}
    settings, notes = resolve_settings(given, _config(), defaults, {})
    assert settings["spark.streaming.stopGracefullyOnShutdown"] == "false"
    assert settings["spark.x"] == "1"
    assert notes == []


def test_a_forced_setting_replacing_the_users_value_says_so_in_one_line() -> None:
    forced = {"spark.streaming.receiver.writeAheadLog.enable": ("true", "lines must survive")}
    given = {"spark.streaming.receiver.writeAheadLog.enable": "false"}
    settings, notes = resolve_settings(given, _config(), {}, forced)
    assert settings["spark.streaming.receiver.writeAheadLog.enable"] == "true"
    assert notes == [
        "Spark setting spark.streaming.receiver.writeAheadLog.enable=true replaces false: "
        "lines must survive"
    ]
    # The launcher's own value (progress bars on for pyspark-shell) is not the user's.
    _, quiet = resolve_settings({"spark.ui.showConsoleProgress": "true"}, _config(), {}, FORCED)
    assert quiet == []


def test_the_apps_own_spark_settings_win_over_everything() -> None:
    own = _config("spark.ui.showConsoleProgress=true", "spark.x=app")
    settings, notes = resolve_settings({"spark.x": "file"}, own, {"spark.x": "d"}, FORCED)
    assert settings["spark.ui.showConsoleProgress"] == "true"
    assert settings["spark.x"] == "app"
    assert notes == []


def test_changed_settings_names_keys_only_and_skips_what_spark_sets_at_each_start() -> None:
    recorded = {
        "spark.authenticate.secret": "old-secret",
        "spark.app.id": "app-1",
        "spark.metrics.conf.x": "1",
        "spark.same": "v",
    }
    today = {"spark.authenticate.secret": "********", "spark.app.id": "app-2", "spark.same": "v"}
    changed = changed_settings(recorded, today)
    assert changed == ["spark.authenticate.secret", "spark.metrics.conf.x"]
    assert "old-secret" not in " ".join(changed)
    # Each run's placeholder is its own: two of them are no change.
    runs = (
        {"spark.authenticate.secret": "********-abc"},
        {"spark.authenticate.secret": "********-xyz"},
    )
    assert changed_settings(*runs) == []
    assert changed_settings({"spark.authenticate.secret": "********"}, runs[0]) == []


@pytest.mark.parametrize(
    ("master", "given", "options"),
    [
        ("spark://10.0.0.1:7077", {}, C1_ONLY),
        ("yarn", {EXECUTOR_OPTIONS: "-Dx=1"}, f"-Dx=1 {C1_ONLY}"),
        # Local: the driver's JVM is the executor (its JIT is set where it is launched).
        ("local[2]", {}, None),
    ],
)
def test_a_clusters_executor_jvms_compile_with_c1_only(
    master: str, given: dict[str, str], options: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    settings, _ = resolve_settings({"spark.master": master, **given}, _config(), {}, FORCED)
    assert settings.get(EXECUTOR_OPTIONS) == options


def test_the_apps_own_executor_options_get_c1_after_them_and_driver_only_leaves_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    own = _config(f"{EXECUTOR_OPTIONS}=-verbose:gc")
    given = {"spark.master": "spark://10.0.0.1:7077", EXECUTOR_OPTIONS: "-Dfile=1"}
    assert resolve_settings(given, own, {}, FORCED)[0][EXECUTOR_OPTIONS] == f"-verbose:gc {C1_ONLY}"
    monkeypatch.setenv(ENV, DRIVER_ONLY)
    assert resolve_settings(given, own, {}, FORCED)[0][EXECUTOR_OPTIONS] == "-verbose:gc"
