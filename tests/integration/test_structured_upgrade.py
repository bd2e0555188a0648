"""The structured engine's checkpoint of 0.4.0 (commit 9827bb2), moved to today's state.

0.4.0 kept the totals in a transformWithState map state per bucket of words; today's
engine keeps them in Spark's own streaming aggregation. The release's `streaming_app`
package is extracted from its commit and run as test_upgrade_from_releases runs the
DStream releases. Its checkpoint must be refused with the guard's one line naming the
layouts and the way out, and `--on-incompatible-checkpoint restore-from-snapshot` must
carry its totals over exactly (its newest snapshot, files it includes still in
`input_dir`, files moved in later), and `streaming-app totals` read the release's
output and then today's in the same directory.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import (
    cli_totals,
    drop_file,
    make_text,
    truth,
    wait_for,
    wait_for_totals,
)
from tests.integration.log_lines import QUERY_STARTED
from tests.integration.test_structured_engine import structured_args
from tests.integration.test_upgrade_from_releases import extract_release, start_release
from tests.integration.test_upgrades import error_lines

pytestmark = pytest.mark.timeout(420)

RELEASE = ("0.4.0", "9827bb2")
SNAPSHOT = "wrote state snapshot batch_id="


def wait_for_snapshot(app: Any, count: int) -> None:
    """Wait until the app has logged more than `count` snapshots."""
    wait_for(f"more than {count} snapshots", lambda: app.log().count(SNAPSHOT) > count, 120, app)


def test_a_0_4_0_structured_checkpoint_is_refused_then_carried_over_exactly(
    dirs: dict[str, Path],
    start_app: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    package = extract_release(tmp_path / "release", *RELEASE)
    rng = random.Random(30)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, rng.randint(20, 40)))
        drop_file(dirs["input"], name, texts[-1].encode())

    args = structured_args(dirs, "--snapshot-interval", "4")
    old = start_release(monkeypatch, start_app, package, *args)
    old.wait_for_log(QUERY_STARTED)
    add("a0.txt")
    wait_for_totals(dirs["output"], truth(texts), old, timeout=180)
    seen = old.log().count(SNAPSHOT)
    add("a1.txt")
    wait_for_totals(dirs["output"], truth(texts), old, timeout=120)
    wait_for_snapshot(old, seen)  # written by the micro-batch after
    add("a2.txt")  # after the snapshot: the restore reads it as a new file
    wait_for_totals(dirs["output"], truth(texts), old, timeout=120)
    assert old.terminate() == 0, old.log()[-3000:]
    assert cli_totals(tmp_path, dirs["output"], "totals-0.4.0") == truth(texts)

    refused = start_app(*args)
    assert refused.wait(timeout=180) == 3, refused.log()[-3000:]
    errors = error_lines(refused)
    assert len(errors) == 1, refused.log()[-3000:]
    assert "state layout map-per-bucket/1024 -> aggregate/bigint" in errors[0]
    assert "--on-incompatible-checkpoint restore-from-snapshot" in errors[0]
    assert "Traceback" not in refused.log()

    add("b0.txt")  # while nothing runs
    restored = start_app(*args, "--on-incompatible-checkpoint", "restore-from-snapshot")
    restored.wait_for_log(r"Seeding the new query from snapshot ")
    aside = list(dirs["checkpoint"].parent.glob("checkpoint.incompatible-*"))
    assert len(aside) == 1, aside
    add("b1.txt")
    wait_for_totals(dirs["output"], truth(texts), restored, timeout=180)
    assert restored.terminate() == 0, restored.log()[-3000:]
    assert "Traceback" not in restored.log()
    assert cli_totals(tmp_path, dirs["output"], "totals-new") == truth(texts)
