"""The structured engine's checkpoint guard: its record, what it refuses, what it lets pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.errors import EXIT_CHECKPOINT, CheckpointError
from streaming_app.recovery.guard import structured_checkpoint
from streaming_app.recovery.metadata import STRUCTURED_METADATA_FILE, read_metadata
from streaming_app.settings.loading import load_config
from streaming_app.settings.schema import AppConfig
from streaming_app.structured.guard import guard_checkpoint, guarded_settings
from streaming_app.structured.state_layout import state_layout

STATE_LAYOUT = state_layout("wordcount", 12)

ENTRY = (
    'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1764000001234,"conf":{'
    '"spark.sql.shuffle.partitions":"3"}}\n{"logOffset":0}\n'
)


def config(ckpt: Path, spark_conf: str | None = None, **cli: Any) -> AppConfig:
    given = {"source": "files", "input_dir": "/data/in", "checkpoint_dir": str(ckpt), **cli}
    conf = (spark_conf,) if spark_conf else ()
    return load_config(None, {}, {k: str(v) for k, v in given.items()}, conf)


def snapshot(ckpt: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ckpt)): p.read_bytes() for p in ckpt.rglob("*") if p.is_file()}


def guarded_and_started(ckpt: Path) -> tuple[Path, dict[str, Any]]:
    """A checkpoint the guard recorded and a query then ran in: its record's path and JSON."""
    guard_checkpoint(LocalFs(), config(ckpt), 2)
    started(ckpt)
    path = ckpt / STRUCTURED_METADATA_FILE
    return path, json.loads(path.read_text())


def started(ckpt: Path) -> None:
    """What Spark leaves once the query ran a micro-batch."""
    (ckpt / "metadata").write_text('{"id":"0f6c2a52-aaaa-bbbb-cccc-000000000000"}\n')
    (ckpt / "offsets").mkdir()
    (ckpt / "offsets" / "0").write_text(ENTRY)


def test_a_new_checkpoint_gets_the_record_of_its_settings(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    guard_checkpoint(LocalFs(), config(ckpt), 2)
    record = read_metadata(LocalFs(), str(ckpt), STRUCTURED_METADATA_FILE)
    assert record is not None and record.engine == "structured"
    assert record.settings == {
        "job": "wordcount",
        "source": "files",
        "input_dir": "/data/in",
        "token_pattern": record.settings["token_pattern"],
        "lowercase": True,
        "state_partitions": 2,
        "state_layout": STATE_LAYOUT,
    }
    raw = json.loads((ckpt / STRUCTURED_METADATA_FILE).read_text())
    assert raw["engine"] == "structured" and raw["spark_version"] and raw["app_version"]
    # Spark's own `metadata` is left alone, and the directory counts as this engine's.
    assert not (ckpt / "metadata").exists()
    assert structured_checkpoint(LocalFs(), str(ckpt))


def test_compatible_changes_pass(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    guard_checkpoint(LocalFs(), config(ckpt), 2)
    started(ckpt)
    before = snapshot(ckpt)
    changed = config(
        ckpt,
        batch_interval=5,
        sinks="console",
        top_n=3,
        spark_conf="spark.sql.shuffle.partitions=2",
    )
    guard_checkpoint(LocalFs(), changed, 8)  # other cores now: the checkpoint keeps 2
    assert snapshot(ckpt) == before


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"input_dir": "/data/other"}, "input_dir /data/in -> /data/other"),
        ({"lowercase": "false"}, "lowercase True -> False"),
        ({"token_pattern": "[a-z]+"}, "token_pattern "),
        (
            {"spark_conf": "spark.sql.shuffle.partitions=4"},
            "spark.sql.shuffle.partitions (the state partitions) 2 -> 4",
        ),
        (
            {"job": "keyed-sum", "csv_fields": "k,v", "key_field": "k", "value_field": "v"},
            "job wordcount -> keyed-sum",
        ),
        ({"source": "socket"}, "source files -> socket"),
    ],
)
def test_an_incompatible_change_exits_3_naming_it_and_touching_nothing(
    tmp_path: Path, change: dict[str, str], named: str
) -> None:
    ckpt = tmp_path / "ckpt"
    guard_checkpoint(LocalFs(), config(ckpt), 2)
    started(ckpt)
    before = snapshot(ckpt)
    with pytest.raises(CheckpointError) as info:
        guard_checkpoint(LocalFs(), config(ckpt, **change), 2)
    message = str(info.value)
    assert info.value.exit_code == EXIT_CHECKPOINT
    assert message.startswith(f"checkpoint {ckpt} cannot be used by this run: ")
    assert named in message, message
    assert "run with the settings that wrote it" in message and "new checkpoint_dir" in message
    assert "\n" not in message
    assert snapshot(ckpt) == before


def test_the_key_settings_of_the_other_job_are_not_compared(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    guard_checkpoint(LocalFs(), config(ckpt), 2)
    started(ckpt)
    guard_checkpoint(LocalFs(), config(ckpt, csv_delimiter=";", topics="t"), 2)
    kafka = guarded_settings(config(ckpt, source="kafka", topics="b,a"), 2)
    assert kafka["topics"] == ["a", "b"] and "input_dir" not in kafka


def test_a_checkpoint_from_before_the_guard_is_recorded_with_its_state_partitions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    started(ckpt)
    guard_checkpoint(LocalFs(), config(ckpt), 2)
    assert "has no streaming_app record" in caplog.text
    record = read_metadata(LocalFs(), str(ckpt), STRUCTURED_METADATA_FILE)
    assert record is not None and record.settings["state_partitions"] == 3  # the offsets log's
    with pytest.raises(CheckpointError, match="input_dir /data/in -> /x"):
        guard_checkpoint(LocalFs(), config(ckpt, input_dir="/x"), 2)


def test_another_spark_minor_version_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    path, record = guarded_and_started(ckpt)
    import pyspark

    major, minor_, _ = pyspark.__version__.split(".", 2)
    path.write_text(json.dumps({**record, "spark_version": f"{major}.{int(minor_) - 1}.0"}))
    with pytest.raises(CheckpointError, match=r"spark version \d+\.\d+\.0 -> "):
        guard_checkpoint(LocalFs(), config(ckpt), 2)
    path.write_text(json.dumps({**record, "spark_version": f"{major}.{minor_}.99"}))
    guard_checkpoint(LocalFs(), config(ckpt), 2)  # a patch release passes


def test_a_checkpoint_of_another_state_layout_is_refused_with_the_way_out(
    tmp_path: Path,
) -> None:
    ckpt = tmp_path / "ckpt"
    path, record = guarded_and_started(ckpt)
    before = {k: v for k, v in record["settings"].items() if k != "state_layout"}
    path.write_text(json.dumps({**record, "settings": before}))  # written by 3660695
    kept = snapshot(ckpt)
    with pytest.raises(CheckpointError) as info:
        guard_checkpoint(LocalFs(), config(ckpt), 2)
    message = str(info.value)
    assert f"state layout value-per-key -> {STATE_LAYOUT}" in message
    assert "--restore-from-snapshot" in message
    assert snapshot(ckpt) == kept
    # 9827bb2 (0.4.0): a map state per bucket, refused the same way.
    settings = {**record["settings"], "state_layout": "map-per-bucket/1024"}
    path.write_text(json.dumps({**record, "settings": settings}))
    kept = snapshot(ckpt)
    with pytest.raises(CheckpointError) as info:
        guard_checkpoint(LocalFs(), config(ckpt), 2)
    assert f"state layout map-per-bucket/1024 -> {STATE_LAYOUT}" in str(info.value)
    assert snapshot(ckpt) == kept
    path.write_text(json.dumps(record))
    guard_checkpoint(LocalFs(), config(ckpt), 2)  # the same layout passes


def test_restore_policy_moves_an_incompatible_checkpoint_aside_and_names_its_snapshot(
    tmp_path: Path,
) -> None:
    from tests.unit.recovery.test_guard import add_snapshot

    ckpt = tmp_path / "ckpt"
    guarded_and_started(ckpt)
    add_snapshot(ckpt / "snapshots", 4000)
    newest = add_snapshot(ckpt / "snapshots", 8000)
    restore = {"on_incompatible_checkpoint": "restore-from-snapshot"}
    with pytest.raises(CheckpointError, match="--on-incompatible-checkpoint restore-from-snapshot"):
        guard_checkpoint(LocalFs(), config(ckpt, input_dir="/x"), 2)  # refused by default
    seed = guard_checkpoint(LocalFs(), config(ckpt, input_dir="/x", **restore), 2)
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("ckpt.incompatible-")]
    assert len(moved) == 1 and not ckpt.exists()
    assert seed is not None and seed.manifest.batch_time_ms == 8000
    assert seed.path == str(moved[0] / "snapshots" / newest.name)
    # A compatible checkpoint is used as it is, whatever the policy.
    guard_checkpoint(LocalFs(), config(ckpt), 2)
    started(ckpt)
    assert guard_checkpoint(LocalFs(), config(ckpt, **restore), 2) is None and ckpt.exists()


def test_restore_policy_without_a_snapshot_exits_3_and_moves_nothing(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    guarded_and_started(ckpt)
    kept = snapshot(ckpt)
    with pytest.raises(CheckpointError, match=r"no snapshot in .* to restore from"):
        guard_checkpoint(
            LocalFs(),
            config(ckpt, input_dir="/x", on_incompatible_checkpoint="restore-from-snapshot"),
            2,
        )
    assert snapshot(ckpt) == kept


def test_before_the_first_micro_batch_the_settings_may_still_change(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    guard_checkpoint(LocalFs(), config(ckpt, input_dir="/mistyped"), 2)
    (ckpt / "metadata").write_text('{"id":"0f6c2a52-aaaa-bbbb-cccc-000000000000"}\n')
    guard_checkpoint(LocalFs(), config(ckpt), 2)  # stopped before any micro-batch: fixed
    record = read_metadata(LocalFs(), str(ckpt), STRUCTURED_METADATA_FILE)
    assert record is not None and record.settings["input_dir"] == "/data/in"


def test_an_unreadable_record_says_what_to_do(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    started(ckpt)
    (ckpt / STRUCTURED_METADATA_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="remove that file"):
        guard_checkpoint(LocalFs(), config(ckpt), 2)


def test_a_spark_setting_the_offsets_log_keeps_is_named_in_one_line_when_not_applied(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "ckpt"
    guarded_and_started(ckpt)
    entry = ENTRY.replace(
        '"spark.sql.shuffle.partitions":"3"',
        '"spark.sql.shuffle.partitions":"2","spark.sql.streaming.stateStore.compression.codec":"lz4"',
    )
    (ckpt / "offsets" / "0").write_text(entry)
    given = config(ckpt, "spark.sql.streaming.stateStore.compression.codec=zstd")
    with caplog.at_level("WARNING"):
        guard_checkpoint(LocalFs(), given, 2)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        "Spark setting spark.sql.streaming.stateStore.compression.codec=zstd is not applied: "
        "the query's checkpoint keeps spark.sql.streaming.stateStore.compression.codec=lz4 "
        "from its first run (Spark reads it from the offsets log)"
    )
    caplog.clear()
    with caplog.at_level("WARNING"):  # the same value, or one the log does not keep: silent
        guard_checkpoint(LocalFs(), config(ckpt, "spark.x=1"), 2)
    assert caplog.records == []
