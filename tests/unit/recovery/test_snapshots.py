"""Snapshot format and lookup, the input-files log, and seeding settings (no JVM)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.errors import ConfigError
from streaming_app.recovery.restore import Seed, hadoop_literal, seeded_config
from streaming_app.recovery.snapshot_writer import SnapshotSettings, is_due
from streaming_app.recovery.snapshots import (
    MANIFEST,
    Manifest,
    find_snapshot,
    format_line,
    latest_snapshot,
    parse_line,
    snapshot_name,
    starting_offsets_spec,
    to_prune,
)
from streaming_app.settings.loading import load_config
from streaming_app.sources.files_log import InputFilesLog, base_name, visible_names
from streaming_app.sources.kafka.offsets import OffsetRange
from streaming_app.sources.positions import kafka_position

KAFKA = Manifest(
    batch_time_ms=6000,
    source="kafka",
    created_at_ms=6100,
    app_version="0.2.0",
    words=2,
    total=5,
    position=kafka_position([OffsetRange("a", 0, 3, 10), OffsetRange("b", 1, 0, 0)]),
)


def write_snapshot(directory: Path, manifest: Manifest, lines: list[str]) -> Path:
    path = directory / snapshot_name(manifest.batch_time_ms)
    path.mkdir(parents=True)
    (path / "part-00000").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (path / MANIFEST).write_text(json.dumps(manifest.to_json()))
    return path


@pytest.mark.parametrize("pair", [("word", 3), ("don't", 1), ('q"uo\\te\t', 2), ("é中", 10**15)])
def test_lines_round_trip(pair: tuple[str, int]) -> None:
    line = format_line(pair)
    assert "\n" not in line
    assert parse_line(line) == pair


@pytest.mark.parametrize(
    "pair",
    [
        ("word", 3),
        ('q"uo\\te\t\n', -2),
        ("é中\u2028\x00", 10**30),
        ("", 0),
        ("c1", Decimal("12.50")),
        ("c2", Decimal("-1E+3")),
        ("flag", True),  # not a total; falls back to json.dumps all the same
    ],
)
def test_lines_are_what_json_dumps_writes(pair: tuple[str, Any]) -> None:
    value = format(pair[1], "f") if isinstance(pair[1], Decimal) else pair[1]
    assert format_line(pair) == json.dumps([pair[0], value], ensure_ascii=False)


@pytest.mark.parametrize("line", ['["a"]', '["a", "x"]', '["a", true]', "{}", "[1, 2]"])
def test_malformed_lines_are_rejected(line: str) -> None:
    with pytest.raises(ValueError):
        parse_line(line)


def test_manifest_round_trips_and_gives_the_next_offsets() -> None:
    again = Manifest.from_json(json.loads(json.dumps(KAFKA.to_json())))
    assert again == KAFKA
    assert again.kafka_offsets() == {("a", 0): 10, ("b", 1): 0}
    assert starting_offsets_spec(again, ("a", "c")) == "a:0=10"
    assert starting_offsets_spec(again, ("c",)) is None
    with pytest.raises(ValueError, match="not a streaming_app snapshot"):
        Manifest.from_json({"format": "other"})


def test_find_snapshot_takes_a_snapshot_a_directory_or_a_checkpoint(tmp_path: Path) -> None:
    snaps = tmp_path / "ckpt" / "snapshots"
    older = write_snapshot(snaps, KAFKA, ['["a", 5]'])
    newer_manifest = Manifest(9000, "kafka", 9100, "0.2.0", 1, 6, {})
    newer = write_snapshot(snaps, newer_manifest, ['["a", 6]'])
    fs = LocalFs()
    assert find_snapshot(fs, str(older))[0] == str(older)
    assert find_snapshot(fs, str(snaps))[0] == str(newer)
    assert find_snapshot(fs, str(tmp_path / "ckpt"))[0] == str(newer)
    # A damaged newest snapshot: the one before it still carries the state over.
    (newer / MANIFEST).write_text("{")
    assert latest_snapshot(fs, str(snaps)) == (str(older), KAFKA)
    with pytest.raises(ConfigError, match="no snapshot there"):
        find_snapshot(fs, str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match="unreadable snapshot"):
        find_snapshot(fs, str(newer))


def test_prune_keeps_the_newest_and_drops_stale_temp_dirs() -> None:
    names = [snapshot_name(t) for t in (1000, 2000, 3000, 4000)]
    names += ["_tmp-snapshot-2500", "_tmp-snapshot-5000", "manifest.json"]
    assert sorted(to_prune(names, 2, 4000)) == sorted(
        [snapshot_name(1000), snapshot_name(2000), "_tmp-snapshot-2500"]
    )


def test_snapshots_fall_on_multiples_of_the_interval() -> None:
    settings = SnapshotSettings("s", 10_000, 3, "files", "c", "i", "id")
    assert is_due(1_795_000_000_000, settings)
    assert not is_due(1_795_000_002_000, settings)
    assert not is_due(1_795_000_000_000, SnapshotSettings("s", 10_000, 0, "files", "c", "i", "x"))


def test_input_files_log_collects_the_files_of_a_range_of_batches(tmp_path: Path) -> None:
    log = InputFilesLog(LocalFs(), str(tmp_path))
    log.write_files(500, ["old.txt"], note="present-at-start")
    log.write_files(1000, ["b.txt", "a.txt", "a.txt"])
    log.write_files(3000, ["c.txt"])
    assert log.read(1000) == {
        "version": 1,
        "batch_time_ms": 1000,
        "files": ["a.txt", "b.txt"],
        "note": "read",
    }
    assert log.files_between(None, 3000) == {"old.txt", "a.txt", "b.txt", "c.txt"}
    assert log.files_between(500, 2000) == {"a.txt", "b.txt"}
    assert base_name("file:/x/in/a.txt") == "a.txt"
    assert visible_names([".hidden", "a.txt", "_b"]) == ["a.txt", "_b"]


def test_hadoop_literal_escapes_globs_and_commas() -> None:
    assert hadoop_literal("/in/a,b[1]*.txt") == r"/in/a\,b\[1\]\*.txt"
    assert hadoop_literal("/in/plain.txt") == "/in/plain.txt"


def test_a_kafka_seed_resumes_at_the_snapshot_offsets(tmp_path: Path) -> None:
    config = load_config(
        env={},
        cli={
            "source": "kafka",
            "topics": "a,b",
            "starting_offsets": "latest",
            "checkpoint_dir": str(tmp_path),
        },
    )
    seeded = seeded_config(config, Seed("snap", KAFKA))
    assert seeded.starting_offsets == "a:0=10,b:1=0"
    files_seed = Seed("snap", Manifest(1, "files", 1, "0.2.0", 0, 0, {"files": []}))
    assert seeded_config(config, files_seed).starting_offsets == "latest"


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"snapshot_interval": "1.5"}, "--snapshot-interval: must be a multiple"),
        ({"snapshot_keep": "-1"}, "--snapshot-keep: must be 0"),
        ({"postgres_table": "bad-name"}, "is not a table name"),
        ({"postgres_table": "t" * 55}, "is not a table name"),
        ({"on_incompatible_checkpoint": "ignore"}, "is not one of fail, restore-from-snapshot"),
    ],
)
def test_bad_snapshot_and_sink_settings_name_the_key(cli: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(env={}, cli=cli)


def test_snapshot_defaults_follow_the_checkpoint(tmp_path: Path) -> None:
    config = load_config(env={}, cli={"checkpoint_dir": str(tmp_path), "batch_interval": "2"})
    assert config.snapshot_ms == config.checkpoint_ms == 20_000
    assert config.snapshots_at == f"{tmp_path}/snapshots"
    assert "postgres_dsn='***'" in repr(
        load_config(env={"STREAMING_APP_POSTGRES_DSN": "postgresql://u:secret@h/db"})
    )


def test_exact_sums_round_trip_as_strings() -> None:
    from decimal import Decimal

    line = format_line(("c1", Decimal("12.50")))
    assert line == '["c1", "12.50"]'
    assert parse_line(line) == ("c1", Decimal("12.50"))
