"""`checkpoint clean` on a Structured Streaming checkpoint: only the temp files of crashes go."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from streaming_app.cli.checkpoint import checkpoint
from streaming_app.recovery.spark_checkpoint import LocalCheckpointFs
from streaming_app.tools.structured_clean import SPARK_KEEPS, plan_clean_structured
from tests.unit.tools.test_structured_inspect import build_structured, inspect

HOUR_S = 3600


def _old(path: Path, data: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)
    then = path.stat().st_mtime - HOUR_S
    os.utime(path, (then, then))
    return path


def _every_file(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_only_old_temp_files_and_orphan_checksums_go(tmp_path: Path) -> None:
    root = build_structured(tmp_path / "ck", planned=150, committed=149)
    spark_files = _every_file(root)
    crashed = _old(root / "offsets" / ".150.1f0c6a4e-8c1b-4a37-9b8e-1c2d3e4f5a6b.tmp")
    deep = _old(root / "state" / "0" / "1" / ".151.zip.7d3c2b1a-0000-4a37-9b8e-1c2d3e4f5a6b.tmp")
    orphan = _old(root / "commits" / ".200.crc")
    young = root / "sources" / "0" / ".150.5e6f7a8b-1111-4a37-9b8e-1c2d3e4f5a6b.tmp"
    young.write_text("being written")

    plan = plan_clean_structured(LocalCheckpointFs(), str(root))

    assert {Path(r.paths[0]) for r in plan.removals} == {crashed, deep, orphan}
    assert {r.kind for r in plan.removals} == {"temp"}
    assert SPARK_KEEPS in plan.kept
    assert any(str(young) in note and "younger than" in note for note in plan.kept)
    # Nothing Spark wrote is planned: not even the 150 offsets entries a DStream
    # checkpoint's prune horizon would thin out.
    assert not {Path(p) for r in plan.removals for p in r.paths} & spark_files


def test_cli_clean_applies_to_a_structured_checkpoint_and_leaves_it_whole(
    tmp_path: Path,
) -> None:
    root = build_structured(tmp_path / "ck", planned=4, committed=3)
    crashed = _old(root / "offsets" / ".4.1f0c6a4e-8c1b-4a37-9b8e-1c2d3e4f5a6b.tmp")
    before = inspect(root)

    result = CliRunner().invoke(checkpoint, ["clean", str(root), "--apply", "--json"])

    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert found["applied"] and not found["failed"]
    assert [r["path"] for r in found["removals"]] == [str(crashed)]
    assert not crashed.exists()
    after = inspect(root)
    assert after["batches"] == before["batches"] and after["state"] == before["state"]
