"""The checkpoint metadata record and the compatibility guard, on local directories."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from streaming_app import __version__
from streaming_app.common.fs import LocalFs
from streaming_app.dstream.startup import TRANSIENT, mark_seeding
from streaming_app.errors import CheckpointError, ConfigError
from streaming_app.recovery.guard import plan_start, seed_at, state_checkpointed
from streaming_app.recovery.metadata import (
    CheckpointMetadata,
    differences,
    read_metadata,
    write_metadata,
)
from streaming_app.recovery.snapshots import MANIFEST, Manifest, snapshot_name
from streaming_app.settings.loading import load_config
from streaming_app.settings.schema import AppConfig

UUID_DIR = "0b9f7a4e-2c1d-4e5f-8a9b-0c1d2e3f4a5b"


def make_config(tmp_path: Path, *extra: tuple[str, str]) -> AppConfig:
    cli = {
        "source": "files",
        "input_dir": str(tmp_path / "in"),
        "checkpoint_dir": str(tmp_path / "ckpt"),
        **dict(extra),
    }
    return load_config(env={}, cli=cli)


def with_versions(metadata: CheckpointMetadata, **versions: str) -> CheckpointMetadata:
    return dataclasses.replace(metadata, **versions)


def spark_checkpoint(directory: Path, *times: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for ms in times:
        (directory / f"checkpoint-{ms}").write_bytes(b"spark")


def add_snapshot(directory: Path, batch_ms: int, source: str = "files") -> Path:
    path = directory / snapshot_name(batch_ms)
    path.mkdir(parents=True)
    (path / "part-00000").write_text('["a", 2]\n')
    manifest = Manifest(batch_ms, source, batch_ms + 5, "0.2.0", 1, 2, {"files": ["f1"]})
    (path / MANIFEST).write_text(json.dumps(manifest.to_json()))
    return path


def test_metadata_round_trips_and_names_the_versions(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    written = CheckpointMetadata.for_config(config)
    write_metadata(LocalFs(), config.checkpoint_dir, written)
    assert read_metadata(LocalFs(), config.checkpoint_dir) == written
    assert written.batch_ms == 1000 and written.source == "files"
    assert written.app_version and written.spark_version.startswith("4.")
    assert "postgres_dsn" not in written.settings  # credentials never go in
    assert differences(written, CheckpointMetadata.for_config(config)) == []


def test_changed_settings_and_versions_are_each_named(tmp_path: Path) -> None:
    before = CheckpointMetadata.for_config(make_config(tmp_path))
    after = CheckpointMetadata.for_config(
        make_config(tmp_path, ("batch_interval", "2"), ("top_n", "5"))
    )
    found = differences(before, after)
    assert "batch_interval 1 s -> 2 s" in found
    assert "top_n 10 -> 5" in found
    assert "checkpoint_interval 10 s -> 20 s" in found
    upgraded = with_versions(before, app_version="9.9.9", python_version="3.99.0")
    assert differences(before, upgraded) == [
        f"app version {before.app_version} -> 9.9.9",
        f"python version {before.python_version} -> 3.99.0",
    ]
    # A Python patch release reads the same pickles; settings read from today's config
    # (master, brokers, credentials, log level) do not shape the graph.
    patched = before.python_version.rsplit(".", 1)[0] + ".999"
    assert differences(before, with_versions(before, python_version=patched)) == []
    same = CheckpointMetadata.for_config(
        make_config(tmp_path, ("master", "local[4]"), ("log_level", "debug"))
    )
    assert differences(before, same) == []


def test_a_checkpoint_of_a_version_recovered_as_it_is_needs_no_snapshot(tmp_path: Path) -> None:
    now = CheckpointMetadata.for_config(make_config(tmp_path))
    assert now.app_version == __version__ != "0.4.0"
    # 0.5.0 added a table to the postgres sink, nothing to the checkpoint.
    assert differences(with_versions(now, app_version="0.4.0"), now) == []
    # 0.5.1 named one function more than 0.5.0; 0.5.2 and 0.5.3 changed no checkpoint;
    # 0.5.4 takes 0.5.3's graph's reduced batch as before.
    for version in ("0.5.0", "0.5.1", "0.5.2", "0.5.3"):
        assert differences(with_versions(now, app_version=version), now) == [], version
    assert differences(with_versions(now, app_version="0.3.0"), now) == [
        f"app version 0.3.0 -> {__version__}"
    ]


def test_no_checkpoint_means_a_new_context(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    plan = plan_start(LocalFs(), config, CheckpointMetadata.for_config(config))
    assert not plan.recover and plan.seed is None


def test_a_matching_checkpoint_is_recovered(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    current = CheckpointMetadata.for_config(config)
    write_metadata(LocalFs(), config.checkpoint_dir, current)
    spark_checkpoint(Path(config.checkpoint_dir), 1000, 2000)
    assert plan_start(LocalFs(), config, current).recover


@pytest.mark.parametrize("logs", [(), ("offsets", "commits", "state")])
def test_a_structured_streaming_checkpoint_is_refused_and_left_as_it_is(
    tmp_path: Path, logs: tuple[str, ...]
) -> None:
    config = make_config(tmp_path)
    ckpt = Path(config.checkpoint_dir)
    ckpt.mkdir(parents=True)
    metadata = '{"id":"5d5b2c7e-8f0e-4b8a-9a53-7c1f3e1b2a90"}'
    (ckpt / "metadata").write_text(metadata)
    for name in logs:
        (ckpt / name).mkdir()
        (ckpt / name / "0").write_text("v1")
    with pytest.raises(CheckpointError) as raised:
        plan_start(LocalFs(), config, CheckpointMetadata.for_config(config))
    assert "Structured Streaming" in str(raised.value)
    assert "--engine structured" in str(raised.value)
    assert (ckpt / "metadata").read_text() == metadata


def test_a_dstream_kafka_checkpoint_with_its_offsets_and_commits_logs_is_recovered(
    tmp_path: Path,
) -> None:
    # The Kafka source's own logs have the names of a Structured Streaming query's.
    config = make_config(tmp_path)
    current = CheckpointMetadata.for_config(config)
    write_metadata(LocalFs(), config.checkpoint_dir, current)
    spark_checkpoint(Path(config.checkpoint_dir), 1000)
    for name in ("offsets", "commits"):
        (Path(config.checkpoint_dir) / name).mkdir()
        (Path(config.checkpoint_dir) / name / "1000").write_text("{}")
    assert plan_start(LocalFs(), config, current).recover


def test_this_engines_own_record_is_not_taken_for_a_structured_checkpoint(
    tmp_path: Path,
) -> None:
    # A run that wrote its record and was killed before Spark's first checkpoint file.
    config = make_config(tmp_path)
    current = CheckpointMetadata.for_config(config)
    write_metadata(LocalFs(), config.checkpoint_dir, current)
    assert not plan_start(LocalFs(), config, current).recover


@pytest.mark.parametrize(
    ("prepare", "reason"),
    [
        ("changed", "batch_interval 1 s -> 2 s"),
        ("missing", "no metadata record"),
        ("garbage", "metadata record is unreadable"),
    ],
)
def test_an_unusable_checkpoint_fails_with_what_differs_and_what_to_do(
    tmp_path: Path, prepare: str, reason: str
) -> None:
    old = make_config(tmp_path)
    ckpt = Path(old.checkpoint_dir)
    spark_checkpoint(ckpt, 1000)
    if prepare != "missing":
        write_metadata(LocalFs(), old.checkpoint_dir, CheckpointMetadata.for_config(old))
    if prepare == "garbage":
        (ckpt / "metadata").write_text("{not json")
    new = make_config(tmp_path, ("batch_interval", "2")) if prepare == "changed" else old
    with pytest.raises(CheckpointError) as raised:
        plan_start(LocalFs(), new, CheckpointMetadata.for_config(new))
    message = str(raised.value)
    assert reason in message
    assert "--on-incompatible-checkpoint restore-from-snapshot" in message
    assert message.endswith("See docs/upgrades.md")
    assert "\n" not in message
    assert (ckpt / "checkpoint-1000").exists()  # `fail` touches nothing


def test_restore_policy_moves_the_checkpoint_aside_and_seeds_from_its_newest_snapshot(
    tmp_path: Path,
) -> None:
    old = make_config(tmp_path)
    ckpt = Path(old.checkpoint_dir)
    spark_checkpoint(ckpt, 1000)
    write_metadata(LocalFs(), old.checkpoint_dir, CheckpointMetadata.for_config(old))
    add_snapshot(ckpt / "snapshots", 4000)
    add_snapshot(ckpt / "snapshots", 8000)
    (ckpt / "snapshots" / snapshot_name(9000)).mkdir()  # no manifest: not complete
    new = make_config(
        tmp_path, ("batch_interval", "2"), ("on_incompatible_checkpoint", "restore-from-snapshot")
    )
    plan = plan_start(LocalFs(), new, CheckpointMetadata.for_config(new))
    assert not plan.recover and plan.seed is not None
    assert plan.seed.manifest.batch_time_ms == 8000
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("ckpt.incompatible-")]
    assert len(moved) == 1 and not ckpt.exists()
    assert plan.seed.path == str(moved[0] / "snapshots" / snapshot_name(8000))
    assert Path(plan.seed.path, MANIFEST).is_file()


def test_restore_policy_without_a_snapshot_fails_and_moves_nothing(tmp_path: Path) -> None:
    old = make_config(tmp_path)
    spark_checkpoint(Path(old.checkpoint_dir), 1000)
    new = make_config(tmp_path, ("on_incompatible_checkpoint", "restore-from-snapshot"))
    with pytest.raises(CheckpointError, match=r"no snapshot in .* to restore from"):
        plan_start(LocalFs(), new, CheckpointMetadata.for_config(new))
    assert Path(old.checkpoint_dir, "checkpoint-1000").exists()


def test_restore_from_snapshot_needs_a_new_checkpoint_dir_but_reruns_recover(
    tmp_path: Path,
) -> None:
    snapshot = add_snapshot(tmp_path / "old" / "snapshots", 5000)
    config = make_config(tmp_path, ("restore_from_snapshot", str(tmp_path / "old")))
    current = CheckpointMetadata.for_config(config)
    plan = plan_start(LocalFs(), config, current)
    assert plan.seed is not None and plan.seed.path == str(snapshot)
    # The seeded context writes its metadata, then Spark its checkpoint and state.
    seeded = CheckpointMetadata.for_config(config, seeded_from=str(snapshot))
    write_metadata(LocalFs(), config.checkpoint_dir, seeded)
    spark_checkpoint(Path(config.checkpoint_dir), 7000)
    (Path(config.checkpoint_dir) / UUID_DIR / "rdd-12").mkdir(parents=True)
    assert plan_start(LocalFs(), config, current).recover
    # Once restored, the old snapshot may be deleted: restarts do not look for it again.
    shutil.rmtree(tmp_path / "old")
    assert plan_start(LocalFs(), config, current).recover
    other = make_config(tmp_path, ("restore_from_snapshot", str(snapshot)))
    write_metadata(LocalFs(), other.checkpoint_dir, current)  # not seeded
    with pytest.raises(ConfigError, match="already holds a checkpoint"):
        plan_start(LocalFs(), other, current)


def test_a_seeded_checkpoint_without_state_is_seeded_again(tmp_path: Path) -> None:
    snapshot = add_snapshot(tmp_path / "old" / "snapshots", 5000)
    config = make_config(tmp_path)
    seeded = CheckpointMetadata.for_config(config, seeded_from=str(snapshot))
    write_metadata(LocalFs(), config.checkpoint_dir, seeded)
    spark_checkpoint(Path(config.checkpoint_dir), 7000, 8000)
    assert not state_checkpointed(LocalFs(), config.checkpoint_dir)
    plan = plan_start(LocalFs(), config, CheckpointMetadata.for_config(config))
    assert not plan.recover and plan.seed is not None and plan.seed.path == str(snapshot)
    assert not Path(config.checkpoint_dir).exists()
    assert [p.name.split("-")[0] for p in tmp_path.glob("ckpt.*")] == ["ckpt.unfinished"]


def test_a_seeded_run_killed_before_any_checkpoint_is_seeded_again(tmp_path: Path) -> None:
    snapshot = add_snapshot(tmp_path / "old" / "snapshots", 5000)
    config = make_config(tmp_path)
    seeded = CheckpointMetadata.for_config(config, seeded_from=str(snapshot))
    write_metadata(LocalFs(), config.checkpoint_dir, seeded)
    plan = plan_start(LocalFs(), config, CheckpointMetadata.for_config(config))
    assert plan.seed is not None and plan.seed.path == str(snapshot)


def test_a_planned_seed_is_recorded_before_spark_starts(tmp_path: Path) -> None:
    snapshot = add_snapshot(tmp_path / "old" / "snapshots", 5000)
    config = make_config(tmp_path, ("restore_from_snapshot", str(snapshot)))
    plan = plan_start(LocalFs(), config, CheckpointMetadata.for_config(config))
    assert mark_seeding(LocalFs(), config, plan) == plan.seed
    # Killed before the factory ran: the restart, even without the flag, seeds again.
    plain = make_config(tmp_path)
    again = plan_start(LocalFs(), plain, CheckpointMetadata.for_config(plain))
    assert again.seed is not None and again.seed.path == str(snapshot)


def test_restoring_from_an_old_checkpoint_finds_snapshots_kept_elsewhere(tmp_path: Path) -> None:
    elsewhere = tmp_path / "snaps"
    snapshot = add_snapshot(elsewhere, 5000)
    old = make_config(tmp_path, ("snapshot_dir", str(elsewhere)))
    write_metadata(LocalFs(), old.checkpoint_dir, CheckpointMetadata.for_config(old))
    assert seed_at(old.checkpoint_dir).path == str(snapshot)


@pytest.mark.parametrize(
    ("text", "transient"),
    [
        ("java.net.ConnectException: Connection refused", True),
        ("org.apache.hadoop.ipc.RetriableException: namenode in safe mode", True),
        ("java.io.InvalidClassException: local class incompatible", False),
        ("org.apache.hadoop.fs.ChecksumException: Checksum error", False),
    ],
)
def test_storage_that_does_not_answer_is_not_an_unreadable_checkpoint(
    text: str, transient: bool
) -> None:
    assert bool(TRANSIENT.search(text)) is transient


def test_later_graph_settings_are_left_out_at_their_defaults() -> None:
    # A checkpoint written before job/window/csv settings existed has none of them: a
    # default run must still match it, or every upgrade would refuse old checkpoints.
    plain = CheckpointMetadata.for_config(load_config(cli={"checkpoint_dir": "c"}))
    assert not {"job", "window", "slide", "csv_fields"} & set(plain.settings)
    windowed = CheckpointMetadata.for_config(
        load_config(cli={"checkpoint_dir": "c", "window": "4", "slide": "2"})
    )
    assert (windowed.settings["window"], windowed.settings["slide"]) == (4000, 2000)
    assert differences(plain, windowed) == ["window None -> 4 s", "slide None -> 2 s"]
    assert (
        differences(plain, CheckpointMetadata.for_config(load_config(cli={"checkpoint_dir": "c"})))
        == []
    )


def test_the_files_base_interval_is_recorded_only_when_not_the_checkpoint_interval() -> None:
    plain = CheckpointMetadata.for_config(load_config(cli={"checkpoint_dir": "c"}))
    same = CheckpointMetadata.for_config(
        load_config(cli={"checkpoint_dir": "c"}, env={"STREAMING_APP_OUTPUT_BASE_INTERVAL": "10"})
    )
    assert "output_base_interval" not in plain.settings | same.settings
    assert differences(plain, same) == []
    other = CheckpointMetadata.for_config(
        load_config(cli={"checkpoint_dir": "c"}, env={"STREAMING_APP_OUTPUT_BASE_INTERVAL": "30"})
    )
    assert other.settings["output_base_interval"] == 30_000
    assert differences(plain, other) == ["output_base_interval None -> 30 s"]


def test_a_checkpoint_of_another_state_layout_is_recovered_with_a_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A checkpoint keeps the state layout it was created with (its graph is rebuilt from
    # the checkpoint), and results do not depend on it: 0.2.0 checkpoints (one state
    # record per key, nothing recorded) still recover under the default of 64 buckets.
    old = make_config(tmp_path, ("state_buckets", "0"))
    recorded = CheckpointMetadata.for_config(old)
    assert "state_buckets" not in recorded.settings
    write_metadata(LocalFs(), old.checkpoint_dir, recorded)
    spark_checkpoint(Path(old.checkpoint_dir), 1000)
    current = make_config(tmp_path)
    assert current.state_buckets == 64
    now = CheckpointMetadata.for_config(current)
    assert now.settings["state_buckets"] == 64
    assert differences(recorded, now) == []
    with caplog.at_level("INFO", logger="streaming_app.recovery.guard"):
        assert plan_start(LocalFs(), current, now).recover
    assert "keeps its totals one state record per key; state_buckets=64 applies" in caplog.text
    # Another graph setting still counts.
    moved = make_config(tmp_path, ("batch_interval", "2"))
    found = differences(recorded, CheckpointMetadata.for_config(moved))
    assert "batch_interval 1 s -> 2 s" in found
    assert not [f for f in found if "state_buckets" in f]
