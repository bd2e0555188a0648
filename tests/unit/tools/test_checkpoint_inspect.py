"""`checkpoint inspect` on fake checkpoint directories: the report's facts, JSON and CLI."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from streaming_app.cli import checkpoint as cli_checkpoint
from streaming_app.cli.checkpoint import checkpoint
from streaming_app.common.fs import LocalFs
from streaming_app.errors import ConfigError
from streaming_app.recovery import spark_checkpoint
from streaming_app.recovery.metadata import CheckpointMetadata, write_metadata
from streaming_app.recovery.snapshots import MANIFEST, Manifest, format_line, snapshot_name
from streaming_app.recovery.spark_checkpoint import (
    FileCheck,
    LocalCheckpointFs,
    NoProbe,
    rdd_refs_in,
)
from streaming_app.sources.files_log import InputFilesLog
from streaming_app.sources.kafka.offset_log import CommitLog, OffsetLog
from streaming_app.sources.kafka.offsets import OffsetRange
from streaming_app.tools.checkpoint_inspect import inspect_checkpoint, utc

T = 1_800_000_000_000  # the newest batch time of the fake checkpoint
OLD = "11111111-1111-1111-1111-111111111111"  # a run whose RDDs nothing references
MID = "22222222-2222-2222-2222-222222222222"  # one RDD still referenced by an old file
NEW = "33333333-3333-3333-3333-333333333333"  # the latest run's folder
EMPTY = "44444444-4444-4444-4444-444444444444"
SNAPSHOTS = [T - 40_000, T - 30_000, T - 20_000, T - 10_000]
FILE_TIMES = [T, T - 1000, T - 2000]


class FakeProbe:
    """Stands in for SparkProbe: a FileCheck per checkpoint file name."""

    def __init__(self, checks: dict[str, FileCheck], verifies: bool = True) -> None:
        self.checks = checks
        self.verifies = verifies
        self.asked: list[str] = []

    def check(self, path: str) -> FileCheck:
        name = os.path.basename(path)
        self.asked.append(name)
        return self.checks.get(name, FileCheck(readable=True, rdd_refs=frozenset()))


def readable(*refs: str, time_ms: int = T) -> FileCheck:
    return FileCheck(
        readable=True,
        checkpoint_time_ms=time_ms,
        rdd_refs=frozenset(refs),
        batch_ms=1000,
        state_checkpoint_ms=10_000,
    )


def default_checks() -> dict[str, FileCheck]:
    checks = {
        f"checkpoint-{T}": readable(f"{NEW}/rdd-20"),
        f"checkpoint-{T}.bk": readable(f"{NEW}/rdd-20", time_ms=T - 1000),
        f"checkpoint-{T - 1000}": readable(f"{NEW}/rdd-20", f"{MID}/rdd-10", time_ms=T - 1000),
        f"checkpoint-{T - 1000}.bk": readable(f"{MID}/rdd-10", f"{MID}/rdd-8", time_ms=T - 1000),
    }
    checks[f"checkpoint-{T - 2000}"] = readable(f"{MID}/rdd-10", time_ms=T - 2000)
    checks[f"checkpoint-{T - 2000}.bk"] = readable(f"{MID}/rdd-10", time_ms=T - 2000)
    return checks


def make_metadata(source: str = "kafka", **settings: Any) -> CheckpointMetadata:
    return CheckpointMetadata(
        app_id="a" * 32,
        created_at_ms=T - 300_000,
        app_version="0.2.0",
        spark_version="4.3.0",
        python_version="3.11.7",
        cloudpickle_version="3.1.1",
        source=source,
        batch_ms=1000,
        checkpoint_ms=10_000,
        settings_fingerprint="f" * 16,
        settings={"topics": ["words"], "snapshot_keep": 2, **settings},
    )


@dataclass
class Layout:
    root: Path
    offsets: list[int]
    committed: list[int]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def build_checkpoint(root: Path, metadata: CheckpointMetadata | None = None) -> Layout:
    """A checkpoint as the app leaves it, with some of everything `clean` looks for."""
    fs = LocalFs()
    ck = str(root)
    for ms in FILE_TIMES:
        _write(root / f"checkpoint-{ms}", b"spark" * 200)
        _write(root / f"checkpoint-{ms}.bk", b"spark" * 100)
    _write(root / f".checkpoint-{T}.crc", b"crc")
    for folder, rdds in {OLD: [1, 2], MID: [8, 9, 10], NEW: [20, 21]}.items():
        for rdd in rdds:
            _write(root / folder / f"rdd-{rdd}" / "part-00000", b"r" * 100)
            _write(root / folder / f"rdd-{rdd}" / ".part-00000.crc", b"c" * 12)
    (root / EMPTY).mkdir()
    (root / "kafka-tick").mkdir()
    _write(root / "receivedBlockMetadata" / "log-1-2", b"wal")
    if metadata is not None:
        write_metadata(fs, ck, metadata)
    offsets, commits = OffsetLog(fs, ck), CommitLog(fs, ck)
    times = list(range(T - 200_000, T + 1, 5000))
    for i, ms in enumerate(times):
        offsets.write_ranges(ms, [OffsetRange("words", 0, i * 10, i * 10 + 10),
                                  OffsetRange("words", 1, 5, 5)])  # fmt: skip
    committed = times[:-2]
    for ms in committed:
        commits.write(ms, {})
    _write(root / "offsets" / f".{T - 200_000}.crc", b"crc")  # Hadoop's side file of an entry
    files_log = InputFilesLog(fs, ck)
    for ms in range(T - 50_000, T + 1, 10_000):
        files_log.write_files(ms, [f"in-{ms}.txt"])
    for ms in SNAPSHOTS:
        snap = root / "snapshots" / snapshot_name(ms)
        _write(snap / "part-00000", (format_line(("w", 3)) + "\n").encode())
        manifest = Manifest(ms, "kafka", ms + 5, "0.2.0", 1, 3, {"kafka": [["words", 0, 70]]})
        _write(snap / MANIFEST, json.dumps(manifest.to_json()).encode())
    # Left by crashes: temp files of every kind, and one young temp file (in use?).
    _write(root / "temp", b"half a checkpoint")
    _write(root / ".metadata.ab12cd_4", b"{")
    _write(root / "offsets" / f".{T}.0123456789ab.tmp", b"{")
    _write(root / "offsets" / f"..{T}.0123456789ab.tmp.crc", b"c")
    _write(root / "commits" / f".{T + 5000}.crc", b"orphan")
    _write(root / "snapshots" / f"_tmp-snapshot-{T}" / "part-00000", b"half")
    _write(root / "snapshots" / f"_replaced-{snapshot_name(T - 10_000)}" / "part-00000", b"x")
    for path in sorted(root.rglob("*"), reverse=True):
        _age(path, 7200)
    for ms in FILE_TIMES:
        _age(root / f"checkpoint-{ms}", 600)
        _age(root / f"checkpoint-{ms}.bk", 600)
    for path in [*(root / NEW).rglob("*"), root / NEW]:
        _age(path, 60)
    _write(root / "commits" / f".{T}.feedfacecafe.tmp", b"{")  # young: kept
    return Layout(root, times, committed)


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return build_checkpoint(tmp_path / "ck", make_metadata())


def inspect(layout: Layout, probe: Any = None, **kwargs: Any) -> dict[str, Any]:
    return inspect_checkpoint(
        LocalCheckpointFs(), str(layout.root), probe or FakeProbe(default_checks()), **kwargs
    )


def test_spark_files_newest_first_with_what_spark_made_of_them(layout: Layout) -> None:
    checks = default_checks()
    checks[f"checkpoint-{T}"] = FileCheck(readable=False, error="EOFException: truncated")
    report = inspect(layout, FakeProbe(checks))
    files = report["spark_files"]
    assert [f["name"] for f in files] == [
        f"checkpoint-{ms}{bk}" for ms in FILE_TIMES for bk in ("", ".bk")
    ]
    newest = files[0]
    assert newest["readable"] is False
    assert newest["error"] == "EOFException: truncated"
    assert newest["size_bytes"] == 1000
    assert newest["batch_time_utc"] == utc(T) == "2027-01-15 08:00:00.000"
    second = files[1]
    assert second["readable"] is True and second["checkpoint_time_ms"] == T - 1000
    assert second["rdd_refs"] == [f"{NEW}/rdd-20"]
    assert files[3]["missing_rdds"] == []
    assert report["latest_checkpoint"] == {
        "batch_time_ms": T,
        "batch_time_utc": utc(T),
        "recovers_from": f"checkpoint-{T}.bk",
    }
    assert any("unreadable: checkpoint-" in n for n in report["notes"])


def test_references_to_rdds_gone_from_disk_are_flagged(layout: Layout) -> None:
    checks = default_checks()
    checks[f"checkpoint-{T - 2000}"] = readable(f"{MID}/rdd-10", f"{MID}/rdd-3")
    report = inspect(layout, FakeProbe(checks))
    entry = next(f for f in report["spark_files"] if f["name"] == f"checkpoint-{T - 2000}")
    assert entry["missing_rdds"] == [f"{MID}/rdd-3"]
    assert "5 of 6 files can restore the state; the other 1 reference" in report["notes"][0]
    checks[f"checkpoint-{T}"] = readable(f"{NEW}/rdd-20", f"{NEW}/rdd-19")
    notes = inspect(layout, FakeProbe(checks))["notes"]
    assert any(n.startswith(f"checkpoint-{T}, the newest readable file, references") for n in notes)
    _write(layout.root / f"unusable-ckpt-{T - 5000}", b"x")
    report = inspect(layout, FakeProbe(checks))
    assert report["set_aside_files"] == [f"unusable-ckpt-{T - 5000}"]
    assert any(n.startswith("set aside by an earlier start") for n in report["notes"])


def test_rdd_folders_show_which_rdds_are_referenced(layout: Layout) -> None:
    folders = {f["name"]: f for f in inspect(layout)["rdd_folders"]}
    assert set(folders) == {OLD, MID, NEW, EMPTY}
    assert [f["name"] for f in folders.values() if f["newest"]] == [NEW]
    refs = {r["name"]: r["referenced"] for r in folders[MID]["rdds"]}
    assert refs == {"rdd-8": True, "rdd-9": False, "rdd-10": True}
    assert folders[OLD]["size_bytes"] == 2 * 112
    assert folders[EMPTY] == {"name": EMPTY, "size_bytes": 0, "newest": False, "rdds": []}


def test_without_verification_nothing_about_the_files_content_is_known(layout: Layout) -> None:
    report = inspect(layout, NoProbe())
    assert report["verified"] is False
    assert {f["readable"] for f in report["spark_files"]} == {None}
    assert report["latest_checkpoint"]["recovers_from"] is None
    assert {r["referenced"] for f in report["rdd_folders"] for r in f["rdds"]} == {None}
    assert not any("exits with code 3" in n for n in report["notes"])


def test_metadata_offsets_input_files_and_snapshots(layout: Layout) -> None:
    report = inspect(layout)
    metadata = report["metadata"]
    assert metadata["status"] == "ok"
    assert metadata["record"]["source"] == "kafka"
    assert metadata["record"]["settings"]["topics"] == ["words"]
    offsets = report["offsets"]
    assert offsets["entries"] == len(layout.offsets) and offsets["commits"] == len(layout.committed)
    assert [e["batch_time_ms"] for e in offsets["tail"]] == layout.offsets[-10:]
    assert offsets["tail"][-1]["records"] == 10
    assert offsets["tail"][-1]["ranges"] == [["words", 0, 400, 410], ["words", 1, 5, 5]]
    assert [e["committed"] for e in offsets["tail"][-3:]] == [True, False, False]
    assert offsets["uncommitted"] == [T - 5000, T]
    files = report["input_files"]
    assert files["entries"] == 6 and files["tail"][-1]["files"] == [f"in-{T}.txt"]
    snapshots = report["snapshots"]
    assert snapshots["count"] == 4
    assert snapshots["latest"]["batch_time_ms"] == T - 10_000
    assert snapshots["latest"]["words"] == 1 and snapshots["latest"]["total"] == 3
    assert snapshots["latest"]["position"] == "kafka: next offsets of 1 partition(s) of words"


def test_sizes_cover_every_top_level_entry(layout: Layout) -> None:
    sizes = inspect(layout)["sizes"]
    on_disk = sum(p.stat().st_size for p in layout.root.rglob("*") if p.is_file())
    assert sizes["total_bytes"] == on_disk == sum(sizes["entries"].values())
    assert sizes["entries"][f"checkpoint-{T}"] == 1000
    assert sizes["entries"][OLD] == 224 and "metadata" in sizes["entries"]


def test_metadata_missing_or_unreadable(tmp_path: Path) -> None:
    layout = build_checkpoint(tmp_path / "ck")
    report = inspect(layout)
    assert report["metadata"] == {"status": "none", "record": None, "error": None}
    assert any("metadata: none" in n for n in report["notes"])
    (layout.root / "metadata").write_text("not json")
    report = inspect(layout)
    assert report["metadata"]["status"] == "unreadable"
    assert "metadata is unreadable" in report["metadata"]["error"]


def test_not_a_checkpoint_directory(tmp_path: Path) -> None:
    fs = LocalCheckpointFs()
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    for name, message in [
        ("missing", "no such directory"),
        ("empty", "is not a checkpoint directory"),
        ("file", "is a file"),
    ]:
        with pytest.raises(ConfigError, match=message):
            inspect_checkpoint(fs, str(tmp_path / name), NoProbe())


def test_kafka_lag_from_the_last_committed_batch(layout: Layout) -> None:
    asked = []

    def latest(servers: str, topics: list[str]) -> dict[tuple[str, int], int]:
        asked.append((servers, topics))
        return {("words", 0): 2100, ("words", 1): 5, ("words", 2): 40}

    lag = inspect(layout, bootstrap_servers="b:9092", latest_offsets=latest)["kafka_lag"]
    assert asked == [("b:9092", ["words"])]
    last = layout.committed[-1]
    end = (layout.offsets.index(last) + 1) * 10
    assert lag["status"] == "ok" and lag["batch_time_ms"] == last
    assert lag["partitions"] == [
        {"topic": "words", "partition": 0, "end_offset": end, "latest_offset": 2100,
         "lag": 2100 - end},
        {"topic": "words", "partition": 1, "end_offset": 5, "latest_offset": 5, "lag": 0},
        {"topic": "words", "partition": 2, "end_offset": None, "latest_offset": 40, "lag": None},
    ]  # fmt: skip
    assert lag["total_lag"] == 2100 - end


def test_kafka_lag_is_a_note_when_the_broker_is_unreachable_or_not_given(layout: Layout) -> None:
    def down(servers: str, topics: list[str]) -> dict[tuple[str, int], int]:
        raise OSError("broker b:9092 did not answer within 10 s")

    lag = inspect(layout, bootstrap_servers="b:9092", latest_offsets=down)["kafka_lag"]
    assert lag["status"] == "unreachable" and "did not answer" in lag["note"]
    lag = inspect(layout)["kafka_lag"]
    assert lag["status"] == "skipped" and "--bootstrap-servers" in lag["note"]


def test_kafka_lag_against_a_closed_port_answers_fast(layout: Layout) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    lag = inspect(
        layout,
        bootstrap_servers=f"127.0.0.1:{port}",
        latest_offsets=cli_checkpoint.broker_latest_offsets,
    )["kafka_lag"]
    assert lag["status"] == "unreachable"
    assert time.monotonic() - started < 12


def test_files_checkpoint_has_no_kafka_lag(tmp_path: Path) -> None:
    root = tmp_path / "ck"
    _write(root / f"checkpoint-{T}", b"x")
    write_metadata(LocalFs(), str(root), make_metadata(source="files"))
    report = inspect(Layout(root, [], []))
    assert report["kafka_lag"]["status"] == "not_kafka"
    assert report["offsets"] is None and report["input_files"] is None
    assert report["snapshots"] == {"directory": None, "count": 0, "latest": None}


def test_rdd_references_are_found_in_decompressed_bytes() -> None:
    # Java serialization: TC_STRING, a two-byte length, then the characters.
    path = f"file:/tmp/ck/{NEW}/rdd-249".encode()
    data = b"\xac\xed\x00\x05t" + len(path).to_bytes(2, "big") + path + b"\x00rdd-7 /x/rdd-8"
    assert rdd_refs_in(data) == {f"{NEW}/rdd-249"}


def test_cli_inspect_json_and_text(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMING_APP_BOOTSTRAP_SERVERS", raising=False)
    runner = CliRunner()
    result = runner.invoke(checkpoint, ["inspect", str(layout.root), "--json", "--no-verify"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["checkpoint_dir"] == str(layout.root) and report["verified"] is False
    monkeypatch.setattr(cli_checkpoint, "_probe", lambda no_verify: FakeProbe(default_checks()))
    result = runner.invoke(checkpoint, ["inspect", str(layout.root)])
    assert result.exit_code == 0, result.output
    for heading in ("Spark checkpoint files: 6", "Metadata", "Offset log: 41 entries",
                    "Input-files log: 6 entries", "Snapshots: 4 in", "RDD checkpoint folders: 4",
                    "Sizes", "Kafka lag: skipped"):  # fmt: skip
        assert heading in result.output
    assert f"Spark recovers from: checkpoint-{T}" in result.output
    assert f"planned but not committed: {T - 5000}, {T}" in result.output


def test_cli_inspect_rejects_what_is_not_a_checkpoint(tmp_path: Path) -> None:
    result = CliRunner().invoke(checkpoint, ["inspect", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    result = CliRunner().invoke(checkpoint, ["inspect", "hdfs://nn/ck"])
    assert result.exit_code == 2 and "only local" in result.output


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    from streaming_app.common import java

    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(java.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match=r"Java is not installed.*--no-verify"):
        spark_checkpoint.start_gateway()
