"""`checkpoint clean` on fake checkpoint directories: what goes, what stays, and why."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from streaming_app.cli import checkpoint as cli_checkpoint
from streaming_app.cli.checkpoint import checkpoint
from streaming_app.recovery.spark_checkpoint import FileCheck, LocalCheckpointFs, NoProbe
from streaming_app.tools.checkpoint_clean import CleanPlan, apply_plan, plan_clean
from tests.unit.tools.test_checkpoint_inspect import (
    EMPTY,
    MID,
    NEW,
    OLD,
    FakeProbe,
    Layout,
    T,
    build_checkpoint,
    default_checks,
    make_metadata,
)

HORIZON = T - 120_000  # min(oldest file - 2 checkpoint intervals, T - retention_ms(1 s, 10 s))
OLD_OFFSETS = [f"{T - 200_000 + i * 5000}" for i in range(16)]  # before the horizon
SPARK_OWN = ("checkpoint-", "metadata", "kafka-tick", "receivedBlockMetadata", NEW)


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return build_checkpoint(tmp_path / "ck", make_metadata())


def plan(layout: Layout, probe: object = None) -> CleanPlan:
    return plan_clean(
        LocalCheckpointFs(),
        str(layout.root),
        probe or FakeProbe(default_checks()),  # type: ignore[arg-type]
    )


def removed(result: CleanPlan, root: Path) -> dict[str, str]:
    return {os.path.relpath(r.paths[0], root): r.kind for r in result.removals}


def tree(root: Path) -> set[str]:
    return {os.path.relpath(p, root) for p in root.rglob("*")}


def expected_removals() -> dict[str, str]:
    expected = {OLD: "rdd-folder", EMPTY: "rdd-folder", f"{MID}/rdd-9": "rdd"}
    expected |= {f"offsets/{t}": "offsets" for t in OLD_OFFSETS}
    expected |= {f"commits/{t}": "commits" for t in OLD_OFFSETS}
    expected |= {f"input-files/{T - k * 10_000}": "input-files" for k in (5, 4, 3, 2)}
    expected |= {f"snapshots/snapshot-{T - k * 10_000}": "snapshot" for k in (4, 3)}
    temps = [
        "temp",
        ".metadata.ab12cd_4",
        f"offsets/.{T}.0123456789ab.tmp",
        f"offsets/..{T}.0123456789ab.tmp.crc",
        f"commits/.{T + 5000}.crc",
        f"snapshots/_tmp-snapshot-{T}",
        f"snapshots/_replaced-snapshot-{T - 10_000}",
    ]
    return expected | dict.fromkeys(temps, "temp")


def test_plan_removes_exactly_what_no_recovery_needs(layout: Layout) -> None:
    result = plan(layout)
    assert removed(result, layout.root) == expected_removals()
    for path in (r.paths[0] for r in result.removals):
        assert not os.path.basename(path).startswith(SPARK_OWN)
    sidecar = next(r for r in result.removals if r.paths[0].endswith(f"offsets/{T - 200_000}"))
    assert sidecar.paths[1].endswith(f"offsets/.{T - 200_000}.crc")
    assert next(r for r in result.removals if r.paths[0].endswith(OLD)).size_bytes == 224
    assert result.total_bytes == sum(r.size_bytes for r in result.removals) > 0
    assert any(f".{T}.feedfacecafe.tmp" in note and "younger" in note for note in result.kept)
    assert any(note.startswith(f"{NEW}/: the newest") for note in result.kept)


def test_an_unreadable_checkpoint_file_keeps_every_rdd_folder(layout: Layout) -> None:
    checks = default_checks()
    checks[f"checkpoint-{T - 2000}.bk"] = FileCheck(readable=False, error="ChecksumException")
    result = plan(layout, FakeProbe(checks))
    kinds = set(removed(result, layout.root).values())
    assert "rdd" not in kinds and "rdd-folder" not in kinds
    assert "offsets" in kinds and "temp" in kinds
    assert any(f"checkpoint-{T - 2000}.bk cannot be read" in note for note in result.kept)


def test_without_verification_rdd_folders_stay_and_the_rest_goes(layout: Layout) -> None:
    result = plan(layout, NoProbe())
    expected = {k: v for k, v in expected_removals().items() if not v.startswith("rdd")}
    assert removed(result, layout.root) == expected
    assert any("--no-verify" in note for note in result.kept)


def test_a_folder_changed_after_the_newest_checkpoint_file_stays(layout: Layout) -> None:
    stamp = time.time() - 300  # after the checkpoint files (600 s), before NEW (60 s)
    os.utime(layout.root / MID / "rdd-9", (stamp, stamp))
    result = plan(layout)
    assert MID + "/rdd-9" not in removed(result, layout.root)
    assert any(note.startswith(f"{MID}/: changed after") for note in result.kept)


def test_without_metadata_intervals_come_from_spark_and_snapshots_all_stay(
    tmp_path: Path,
) -> None:
    layout = build_checkpoint(tmp_path / "ck")
    result = plan(layout)
    got = removed(result, layout.root)
    assert {k for k, v in got.items() if v == "offsets"} == {f"offsets/{t}" for t in OLD_OFFSETS}
    assert not any(v == "snapshot" for v in got.values())
    # The oldest snapshot (T - 40 s) includes the input files of batches up to it.
    assert {k for k, v in got.items() if v == "input-files"} == {
        f"input-files/{T - 50_000}",
        f"input-files/{T - 40_000}",
    }
    assert any("snapshot_keep is not recorded" in note for note in result.kept)


def test_without_any_interval_the_logs_stay(tmp_path: Path) -> None:
    layout = build_checkpoint(tmp_path / "ck")
    got = removed(plan(layout, NoProbe()), layout.root)
    assert not any(v in ("offsets", "commits") for v in got.values())


def test_apply_removes_exactly_the_plan(layout: Layout) -> None:
    before = tree(layout.root)
    result = plan(layout)
    assert apply_plan(LocalCheckpointFs(), result) == []
    gone = {os.path.relpath(p, layout.root) for r in result.removals for p in r.paths}
    assert tree(layout.root) == {
        p for p in before if not any(p == g or p.startswith(g + "/") for g in gone)
    }
    assert plan(layout).removals == []  # nothing left to clean


def test_cli_dry_run_removes_nothing_and_apply_removes_the_plan(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_checkpoint, "_probe", lambda no_verify: FakeProbe(default_checks()))
    runner = CliRunner()
    before = tree(layout.root)
    result = runner.invoke(checkpoint, ["clean", str(layout.root)])
    assert result.exit_code == 0, result.output
    assert tree(layout.root) == before
    count = len(expected_removals())
    assert f"Would remove {count} item(s)" in result.output and "--apply" in result.output
    assert re.search(rf"rdd-folder +{OLD} ", result.output)
    assert re.search(
        rf"offsets +offsets/{OLD_OFFSETS[0]} \.\. {OLD_OFFSETS[-1]} \(16 entries\)", result.output
    )
    result = runner.invoke(checkpoint, ["clean", str(layout.root), "--dry-run", "--json"])
    assert json.loads(result.output)["applied"] is False and tree(layout.root) == before
    result = runner.invoke(checkpoint, ["clean", str(layout.root), "--apply"])
    assert result.exit_code == 0, result.output
    assert f"Removed {count} item(s)" in result.output
    assert not (layout.root / OLD).exists() and (layout.root / NEW).exists()
    result = runner.invoke(checkpoint, ["clean", str(layout.root), "--apply"])
    assert "Nothing to remove" in result.output


def test_cli_clean_rejects_what_is_not_a_checkpoint(tmp_path: Path) -> None:
    result = CliRunner().invoke(checkpoint, ["clean", str(tmp_path / "nope"), "--apply"])
    assert result.exit_code == 2
    assert result.output == f"Error: {tmp_path / 'nope'}: no such directory\n"
