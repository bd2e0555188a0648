"""The structured engine's snapshots and restores without a JVM: when one is due, the
position from the offsets and file source logs, the seed record and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.errors import CheckpointError, ConfigError
from streaming_app.recovery.metadata import STRUCTURED_METADATA_FILE
from streaming_app.recovery.snapshots import Manifest
from streaming_app.settings.loading import load_config
from streaming_app.structured.seed import SEED_RECORD, plan_seed, read_seed_record, seed_line
from streaming_app.structured.snapshot_writer import batch_position, is_due, snapshot_due
from streaming_app.structured.source_log import file_name, files_up_to, log_offset

META = '{"batchWatermarkMs":0,"batchTimestampMs":1764000001234,"conf":{}}'


def test_a_snapshot_is_due_on_the_first_micro_batch_after_each_multiple_of_the_interval() -> None:
    assert is_due(10_500, None, 4000)  # the query's first micro-batch
    assert not is_due(10_500, 9000, 4000)
    assert is_due(12_100, 10_500, 4000)
    assert is_due(30_000, 12_100, 4000)  # after idle intervals: one, not several
    assert not is_due(12_100, 12_000, 4000)


def test_snapshot_keep_0_makes_no_micro_batch_due() -> None:
    config = load_config(None, env={}, cli={"snapshot_keep": "0", "snapshot_interval": "4"})
    assert not snapshot_due(config, 10_500, None)
    assert not snapshot_due(config, 12_100, 10_500)
    kept = load_config(None, env={}, cli={"snapshot_interval": "4"})
    assert snapshot_due(kept, 10_500, None) and snapshot_due(kept, 12_100, 10_500)
    assert not snapshot_due(kept, 10_500, 9000)


def _log(directory: Path, name: str, entries: list[tuple[str, int]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": p, "timestamp": 1, "batchId": b}) for p, b in entries]
    (directory / name).write_text("\n".join(lines) + "\n")


def test_the_files_counted_come_from_the_file_source_log_compacted_or_not(tmp_path: Path) -> None:
    sources = tmp_path / "sources" / "0"
    _log(sources, "0", [("file:///in/a.txt", 0)])
    _log(sources, "1", [("file:///in/b%20c.txt", 1)])
    fs = LocalFs()
    assert files_up_to(fs, str(tmp_path), -1) == set()
    assert files_up_to(fs, str(tmp_path), 0) == {"a.txt"}
    assert files_up_to(fs, str(tmp_path), 1) == {"a.txt", "b c.txt"}
    # A compacted entry holds every file up to it; the deltas before it may be gone.
    (sources / "0").unlink()
    (sources / "1").unlink()
    _log(sources, "2.compact", [("file:///in/a.txt", 0), ("file:///in/b.txt", 1), ("x/d", 2)])
    _log(sources, "3", [("file:///in/e.txt", 3)])
    assert files_up_to(fs, str(tmp_path), 3) == {"a.txt", "b.txt", "d", "e.txt"}
    with pytest.raises(ValueError, match="missing"):
        files_up_to(fs, str(tmp_path), 4)
    assert file_name("file:///in/%C3%A9t%C3%A9.txt") == "été.txt"
    assert log_offset({"logOffset": 3}) == 3 and log_offset(None) == -1
    with pytest.raises(ValueError):
        log_offset({"topic": {"0": 1}})


def test_the_kafka_position_is_the_micro_batch_end_offsets(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "4").write_text(f'v1\n{META}\n{{"t": {{"1": 7, "0": 42}}}}')
    config = load_config(
        None, env={}, cli={"source": "kafka", "topics": "t", "checkpoint_dir": str(tmp_path)}
    )
    assert batch_position(LocalFs(), config, 4) == {"kafka": [["t", 0, 42], ["t", 1, 7]]}


def _snapshot(path: Path, engine: str = "dstream") -> Path:
    path.mkdir(parents=True)
    (path / "part-00000").write_text('["a", 3]\n["b", 1]\n')
    manifest = Manifest(1000, "kafka", 1, "0", 2, 4, {"kafka": [["t", 0, 4]]}, "ctx", engine)
    (path / "manifest.json").write_text(json.dumps(manifest.to_json()))
    return path


def test_a_restore_records_its_seed_and_a_restart_before_micro_batch_0_commits_seeds_again(
    tmp_path: Path,
) -> None:
    snapshot = _snapshot(tmp_path / "snaps" / "snapshot-1000")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    # The guard's record of an earlier start that planned nothing: still a new checkpoint.
    (ckpt / STRUCTURED_METADATA_FILE).write_text("{}")
    cli = {"checkpoint_dir": str(ckpt), "restore_from_snapshot": str(tmp_path / "snaps")}
    fs = LocalFs()
    seed = plan_seed(fs, load_config(None, env={}, cli=cli))
    assert seed is not None and seed.path == str(snapshot)
    assert read_seed_record(fs, str(ckpt)) == seed
    # Spark wrote its files, micro-batch 0 did not commit: the same seed, with or without
    # the option (a supervisor may drop it).
    (ckpt / "metadata").write_text('{"id":"q"}')
    (ckpt / "offsets").mkdir()
    assert plan_seed(fs, load_config(None, env={}, cli=cli)) == seed
    assert plan_seed(fs, load_config(None, env={}, cli={"checkpoint_dir": str(ckpt)})) == seed
    # Once micro-batch 0 committed, the checkpoint holds the totals: no seed any more.
    (ckpt / "commits").mkdir()
    (ckpt / "commits" / "0").write_text("v1\n{}")
    assert plan_seed(fs, load_config(None, env={}, cli=cli)) is None


def test_a_restore_into_a_checkpoint_of_another_query_is_refused(tmp_path: Path) -> None:
    _snapshot(tmp_path / "snaps" / "snapshot-1000")
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "metadata").write_text('{"id":"q"}')
    cli = {"checkpoint_dir": str(ckpt), "restore_from_snapshot": str(tmp_path / "snaps")}
    with pytest.raises(ConfigError, match="already holds a checkpoint"):
        plan_seed(LocalFs(), load_config(None, env={}, cli=cli))
    assert not (ckpt / SEED_RECORD).exists()
    # No snapshot there: the DStream engine's message, exit 2.
    cli["restore_from_snapshot"] = str(tmp_path / "nothing")
    with pytest.raises(ConfigError, match="no snapshot there"):
        plan_seed(LocalFs(), load_config(None, env={}, cli={**cli, "checkpoint_dir": "new"}))
    (ckpt / SEED_RECORD).write_text("{")
    with pytest.raises(CheckpointError, match="unreadable"):
        read_seed_record(LocalFs(), str(ckpt))


def test_manifests_name_their_engine_and_older_ones_read_as_dstream() -> None:
    record = Manifest(1000, "files", 1, "0", 0, 0, {}, "q", "structured").to_json()
    assert record["engine"] == "structured"
    assert Manifest.from_json(record).engine == "structured"
    del record["engine"]
    assert Manifest.from_json(record).engine == "dstream"


def test_seed_input_lines_keep_keys_and_exact_totals() -> None:
    from decimal import Decimal

    line = seed_line(('caf\u00e9 "x"\t', Decimal("123456789012345678.300000000001")))
    assert json.loads(line) == {
        "key": 'caf\u00e9 "x"\t',
        "value": "123456789012345678.300000000001",
    }
    assert json.loads(seed_line(("a", -3))) == {"key": "a", "value": "-3"}


def test_a_recovered_querys_first_micro_batch_leaves_its_due_base_and_snapshot_to_the_next() -> (
    None
):
    from streaming_app.structured.sinks import Deferred

    deferred = Deferred()  # a recovered query: its first micro-batch is 7
    assert deferred.decide(7, base=True, snapshot=True) == (False, False)
    assert deferred.decide(8, base=False, snapshot=False) == (True, True)
    assert deferred.decide(9, base=False, snapshot=False) == (False, False)
    assert deferred.decide(10, base=True, snapshot=False) == (True, False)

    only_snapshot = Deferred()
    assert only_snapshot.decide(3, base=False, snapshot=True) == (False, False)
    assert only_snapshot.decide(4, base=False, snapshot=False) == (False, True)

    nothing_due = Deferred()
    assert nothing_due.decide(3, base=False, snapshot=False) == (False, False)
    assert nothing_due.decide(4, base=False, snapshot=True) == (False, True)

    new_query = Deferred()  # micro-batch 0 starts the chain and writes the first snapshot
    assert new_query.decide(0, base=True, snapshot=True) == (True, True)
