"""`checkpoint inspect` and `clean` on real checkpoints written by the app (real Spark)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import App, drop_file, make_text, truth, wait_for, wait_for_totals

pytestmark = pytest.mark.timeout(300)

UUID = re.compile(r"^[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$")


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    """`streaming-app checkpoint ARGS` in a subprocess (it starts its own JVM)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMING_APP_")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return subprocess.run(
        [sys.executable, "-m", "streaming_app.cli.checkpoint", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def inspect_json(checkpoint: Path) -> dict[str, Any]:
    result = tool("inspect", str(checkpoint), "--json")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def rdd_folders(checkpoint: Path) -> set[str]:
    return {p.name for p in checkpoint.iterdir() if p.is_dir() and UUID.match(p.name)}


class Runs:
    """Runs of the app on one checkpoint, each adding an input file and ending by --duration."""

    def __init__(self, dirs: dict[str, Path], start_app: Any) -> None:
        self.dirs, self.start_app = dirs, start_app
        self.rng = random.Random(7)
        self.texts: list[str] = []

    def start(self, expect: str) -> App:
        app: App = self.start_app(*files_args(self.dirs, "--duration", "15"))
        app.wait_for_log(expect, timeout=120)
        self.texts.append(make_text(self.rng, 30))
        drop_file(self.dirs["input"], f"in-{len(self.texts)}.txt", self.texts[-1].encode())
        wait_for_totals(self.dirs["output"], truth(self.texts), app, timeout=150)
        return app

    def run(self, expect: str) -> None:
        assert self.start(expect).wait(timeout=150) == 0


def test_inspect_tells_readable_files_from_a_corrupted_one(
    dirs: dict[str, Path], start_app: Any
) -> None:
    Runs(dirs, start_app).run(r"Started new streaming context")
    checkpoint = dirs["checkpoint"]
    report = inspect_json(checkpoint)
    files = report["spark_files"]
    assert len(files) >= 2 and report["verified"] is True
    assert [f["readable"] for f in files] == [True] * len(files), files
    assert report["latest_checkpoint"]["recovers_from"] == files[0]["name"]
    assert files[0]["rdd_refs"] and files[0]["missing_rdds"] == []
    assert files[0]["checkpoint_time_ms"] <= files[0]["batch_time_ms"]
    referenced = {
        f"{folder['name']}/{rdd['name']}"
        for folder in report["rdd_folders"]
        for rdd in folder["rdds"]
        if rdd["referenced"]
    }
    assert set(files[0]["rdd_refs"]) <= referenced

    newest = checkpoint / files[0]["name"]
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    # Without Hadoop's checksum file, Spark's own decompression has to notice.
    (checkpoint / f".{newest.name}.crc").unlink(missing_ok=True)
    report = inspect_json(checkpoint)
    by_name = {f["name"]: f for f in report["spark_files"]}
    assert by_name[newest.name]["readable"] is False
    assert by_name[newest.name]["error"]
    assert all(f["readable"] is True for name, f in by_name.items() if name != newest.name)
    assert report["latest_checkpoint"]["recovers_from"] == files[1]["name"]
    assert any("unreadable" in note for note in report["notes"])
    text = tool("inspect", str(checkpoint))
    assert text.returncode == 0 and f"{newest.name}: " in text.stdout


def test_clean_after_two_runs_then_a_third_run_recovers(
    dirs: dict[str, Path], start_app: Any
) -> None:
    runs = Runs(dirs, start_app)
    checkpoint = dirs["checkpoint"]
    runs.run(r"Started new streaming context")
    first = rdd_folders(checkpoint)
    runs.run(r"Recovered streaming context from checkpoint")
    second = rdd_folders(checkpoint) - first
    assert first and second, (first, second)
    spark_files = sorted(p.name for p in checkpoint.glob("checkpoint-*"))

    result = tool("clean", str(checkpoint), "--apply", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["applied"] is True and plan["failed"] == []
    gone = {os.path.relpath(r["path"], checkpoint) for r in plan["removals"]}
    # The first run's folders hold nothing the second run's checkpoint files reference.
    assert {g for g in gone if UUID.match(g)} == first
    assert rdd_folders(checkpoint) == second
    assert sorted(p.name for p in checkpoint.glob("checkpoint-*")) == spark_files
    assert not any(g.startswith(("checkpoint-", "metadata")) for g in gone)

    # The third run restores the state from the second run's RDD checkpoints: it starts,
    # and checkpoints new state computed on top of them in a folder of its own.
    app = start_app(*files_args(dirs, "--duration", "15"))
    app.wait_for_log(r"Recovered streaming context from checkpoint .* at batch_time_ms=\d+", 120)
    wait_for_state_checkpoint(checkpoint, first | second, app)
    assert "Creating new context" not in app.log()
    app.kill9()  # its replay of the time since the second run would take a while


def wait_for_state_checkpoint(checkpoint: Path, known: set[str], app: App) -> None:
    """Wait until a new RDD folder holds a state checkpoint; fail if the app exits first."""

    def written() -> bool:
        new = rdd_folders(checkpoint) - known
        return any(any((checkpoint / name).glob("rdd-*/part-*")) for name in new)

    wait_for("a state checkpoint in a new RDD folder", written, 150, app, 0.5)


@pytest.mark.timeout(120)
def test_inspect_a_structured_checkpoint(dirs: dict[str, Path], start_app: Any) -> None:
    """A few micro-batches of `run --engine structured`, stopped; inspect needs no JVM."""
    from tests.integration.log_lines import QUERY_STARTED, WRITTEN
    from tests.integration.test_structured_engine import structured_args

    rng, texts = random.Random(4), []
    app = start_app(*structured_args(dirs, "--spark-conf", "spark.sql.shuffle.partitions=2"))
    app.wait_for_log(QUERY_STARTED)
    for i in range(3):
        texts.append(make_text(rng, 20))
        drop_file(dirs["input"], f"s{i}.txt", texts[-1].encode())
        wait_for_totals(dirs["output"], truth(texts), app)
    assert app.terminate() == 0
    written = max(int(b) for b in re.findall(WRITTEN, app.log()))

    started = time.monotonic()
    report = inspect_json(dirs["checkpoint"])
    assert time.monotonic() - started < 15  # no JVM: a few file reads
    assert report["engine"] == "structured" and report["query"]["status"] == "ok"
    batches = report["batches"]
    assert batches["last_committed"] == batches["last_planned"] == written
    assert batches["pending"] == [] and batches["conf"]["spark.sql.shuffle.partitions"] == "2"
    assert report["sources"][0]["last_batch_id"] == written
    [operator] = report["state"]["operators"]
    assert operator["operator_id"] == 0 and operator["partitions"] == 2
    # Spark's own aggregation: one operator, no state variables of a processor.
    assert operator["name"] == "stateStoreSave" and operator["state_variables"] == [], operator
    assert operator["latest_version"] == written + 1 and operator["size_bytes"] > 0
    text = tool("inspect", str(dirs["checkpoint"]))
    assert text.returncode == 0, text.stderr
    assert "Engine: structured (Structured Streaming query id " in text.stdout
    assert f"last planned: {written}; last committed: {written}" in text.stdout
    assert "planned but not committed: none" in text.stdout
    # clean: a real query's checkpoint has nothing a crash left, and nothing of Spark's goes.
    files = sorted(p for p in dirs["checkpoint"].rglob("*") if p.is_file())
    cleaned = tool("clean", str(dirs["checkpoint"]), "--apply")
    assert cleaned.returncode == 0, cleaned.stderr
    assert "Nothing to remove" in cleaned.stdout and "Spark keeps them bounded" in cleaned.stdout
    assert sorted(p for p in dirs["checkpoint"].rglob("*") if p.is_file()) == files
