"""The upgrade from 0.2.0 (commit 6dcb10d) with a checkpoint written by the real 0.2.0 code.

0.2.0's `streaming_app` package is extracted from that commit of this repository and run
with the same Python (its dependencies are the same) under PYTHONPATH, from a working
directory outside the checkout (`python -m` puts the working directory first on the path).
0.3.0 moved the modules that a checkpoint's pickled graph names, so it must refuse that
checkpoint with one line saying how to carry it over, and carry the totals and Kafka
positions over exactly from 0.2.0's newest snapshot when asked to.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.recovery.metadata import read_metadata
from streaming_app.recovery.snapshots import read_manifest, snapshot_batch
from tests.integration.conftest import kafka_args
from tests.integration.harness import App, make_text, truth, wait_for_totals
from tests.integration.kafka_helpers import (
    assert_log_contiguous,
    end_offsets,
    fresh_topic,
    log_entries,
    send,
)
from tests.integration.test_upgrades import error_lines, snapshots_written, wait_for_snapshot_after

pytestmark = pytest.mark.timeout(360)

V020_COMMIT = "6dcb10d"
REPO_ROOT = Path(__file__).resolve().parents[2]


def extract_v020(target: Path) -> Path:
    """0.2.0's package from commit 6dcb10d of this repository, under `target`."""
    archive = target.parent / "v020.tar"
    result = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "-o", str(archive), V020_COMMIT, "streaming_app"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        reason = (
            f"commit {V020_COMMIT} (0.2.0) is not in the repository at {REPO_ROOT} "
            f"(a shallow clone? fetch with full history): {result.stderr.strip()}"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    target.mkdir()
    subprocess.run(["tar", "-x", "-f", str(archive), "-C", str(target)], check=True)
    return target


def v020_env(v020: Path) -> dict[str, str]:
    """The environment that makes `python -m streaming_app` run 0.2.0."""
    return {"PYTHONPATH": str(v020), "SPARK_LOCAL_IP": "127.0.0.1"}


def start_v020(monkeypatch: pytest.MonkeyPatch, start_app: Any, v020: Path, *args: str) -> App:
    """Start 0.2.0's `streaming-app run ARGS` (its Spark workers inherit the path too)."""
    with monkeypatch.context() as patch:
        patch.setenv("PYTHONPATH", str(v020))
        patch.chdir(v020.parent)  # not the checkout: `python -m` would import 0.3.0 from it
        app: App = start_app(*args)
    return app


def cli_totals(tmp_path: Path, output_dir: Path, name: str) -> dict[str, int]:
    """What this version's `streaming-app totals --output-dir DIR` prints, parsed."""
    app = App(["--output-dir", str(output_dir)], tmp_path, name, command="totals")
    assert app.wait(timeout=60) == 0, app.log()
    totals = {}
    for line in app.out_path.read_text("utf-8").splitlines():
        key, value = line.split("\t")
        totals[key] = int(value)
    return totals


def test_a_0_2_0_checkpoint_is_refused_then_carried_over_exactly(
    dirs: dict[str, Path],
    start_app: Any,
    kafka_bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    v020 = extract_v020(tmp_path / "v020")
    probe = subprocess.run(
        [sys.executable, "-c", "import streaming_app as s; print(s.__version__, s.__file__)"],
        env=dict(os.environ, **v020_env(v020)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    version, location = probe.stdout.split()
    assert version == "0.2.0" and Path(location).is_relative_to(v020), probe.stdout

    rng = random.Random(20)
    topic = fresh_topic("upgrade")
    lines: list[str] = []

    def produce(count: int) -> None:
        batch = make_text(rng, count).splitlines()
        lines.extend(batch)
        send(kafka_bootstrap, topic, batch)

    args = kafka_args(dirs, kafka_bootstrap, topic, "--snapshot-interval", "8")
    old = start_v020(monkeypatch, start_app, v020, *args)
    old.wait_for_log(r"Started new streaming context")
    produce(150)
    wait_for_totals(dirs["output"], truth(lines), old)
    # Stop soon after a snapshot, with records read since: the restore reads them again
    # (unless a snapshot slips in during the stop; printed below).
    while True:
        wait_for_snapshot_after(old, snapshots_written(old))
        seen = snapshots_written(old)
        produce(80)
        wait_for_totals(dirs["output"], truth(lines), old)
        if snapshots_written(old) == seen:
            break
    produced_by_stop = len(lines)
    assert old.terminate() == 0, old.log()[-3000:]
    assert "Traceback" not in old.log()
    written = read_metadata(LocalFs(), str(dirs["checkpoint"]))
    assert written is not None and written.app_version == "0.2.0"
    # 0.2.0's files sink output, read by 0.3.0's `totals`.
    assert cli_totals(tmp_path, dirs["output"], "totals-0.2.0") == truth(lines)

    refused = start_app(*args)
    assert refused.wait() == 3, refused.log()[-3000:]
    errors = error_lines(refused)
    assert len(errors) == 1, refused.log()[-3000:]
    assert "app version 0.2.0 -> 0.3.0" in errors[0]
    assert "--on-incompatible-checkpoint restore-from-snapshot" in errors[0]
    assert "Traceback" not in refused.log() and "ERROR" not in refused.log()
    assert dirs["checkpoint"].is_dir()  # refused, not touched
    produce(60)  # while no version runs

    restored = start_app(*args, "--on-incompatible-checkpoint", "restore-from-snapshot")
    match = restored.wait_for_log(r"restoring from snapshot (\S+) \(batch_time_ms=(\d+)\)")
    snapshot, snapshot_ms = Path(match.group(1)), int(match.group(2))
    restored.wait_for_log(r"Seeding the new context from snapshot " + re.escape(str(snapshot)))
    aside = list(dirs["checkpoint"].parent.glob("checkpoint.incompatible-*"))
    assert len(aside) == 1 and snapshot.is_relative_to(aside[0]), (aside, snapshot)
    assert snapshot_batch(snapshot.name) == snapshot_ms
    produce(70)
    wait_for_totals(dirs["output"], truth(lines), restored, timeout=120)
    restored.wait_caught_up()
    assert restored.terminate() == 0, restored.log()[-3000:]
    assert "Traceback" not in restored.log()
    assert cli_totals(tmp_path, dirs["output"], "totals-0.3.0") == truth(lines)

    # Positions: 0.2.0 had read up to the snapshot's offsets by its batch; 0.3.0's new
    # offset log starts there and runs without gap or overlap to the end of the topic.
    manifest = read_manifest(LocalFs(), str(snapshot))
    assert manifest.app_version == "0.2.0" and manifest.batch_time_ms == snapshot_ms
    at_snapshot = {
        (t, p): end
        for batch_ms, entry in sorted(log_entries(aside[0], "offsets").items())
        if batch_ms <= snapshot_ms
        for t, p, _, end in entry["ranges"]
    }
    assert at_snapshot == manifest.kafka_offsets()
    new_log = sorted(log_entries(dirs["checkpoint"], "offsets").items())
    first = {(t, p): start for t, p, start, _ in new_log[0][1]["ranges"]}
    assert first == manifest.kafka_offsets()
    assert_log_contiguous(dirs["checkpoint"])
    last = {p: end for _, entry in new_log for t, p, _, end in entry["ranges"]}
    assert last == end_offsets(kafka_bootstrap, topic)
    reread = produced_by_stop - sum(manifest.kafka_offsets().values())
    print(f"records 0.2.0 counted after its snapshot, read again by 0.3.0: {reread}")
