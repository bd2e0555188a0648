"""The driver JVM starts from the class archive that scripts/test.sh writes, and logs as before.

The archive is made here when the suite runs without scripts/test.sh (about 35 s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streaming_app.common import jvm_archive
from streaming_app.common.spark_env import repo_conf_dir
from tests.integration.conftest import files_args
from tests.integration.harness import App, output_without_traces

pytestmark = pytest.mark.timeout(400)


def jvm_of(app: App) -> int:
    """The pid of the JVM the app's Python driver launched (its child)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == app.proc.pid and "java" in (stat.parent / "cmdline").read_text():
            return int(stat.parent.name)
    raise AssertionError("no JVM under the app:\n" + app.log()[-2000:])


def test_the_driver_jvm_maps_the_archive_and_logs_with_the_apps_conf(
    dirs: dict[str, Path], start_app: Any
) -> None:
    archive = jvm_archive.build(repo_conf_dir())  # made already by scripts/test.sh
    for setting in ("1", "0"):
        app = start_app(*files_args(dirs), env={jvm_archive.ENV: setting})
        app.wait_for_log(r"metrics_recorder: batch ")
        maps = Path(f"/proc/{jvm_of(app)}/maps").read_text()
        assert (str(archive) in maps) == (setting == "1"), setting
        assert app.terminate() == 0
        log = output_without_traces(app)
        # conf/log4j2.properties, not Spark's default profile, in both launches.
        assert "Using Spark's default log4j profile" not in log, log[-2000:]
        assert " INFO SparkContext:" not in log, log[-2000:]
