"""`checkpoint inspect` on a Structured Streaming checkpoint built with Spark's file formats.

The formats are copied from a checkpoint `run --engine structured` left (PySpark 4.3.0,
RocksDB state; tests/integration/test_checkpoint_tools.py inspects such a real one):
`metadata` `{"id":...}`; `offsets/<id>` a version line, the batch metadata, a line per
source; `commits/<id>`; the file source's `sources/0/<id>` log; `state/0/<partition>/` with
`<version>.zip` and `SSTs/`, `state/0/_metadata/v2/<id>` and `_stateSchema/`. No JVM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from streaming_app.cli import checkpoint as cli_checkpoint
from streaming_app.cli.checkpoint import checkpoint
from streaming_app.recovery.metadata import write_metadata
from streaming_app.recovery.spark_checkpoint import LocalCheckpointFs
from streaming_app.tools.structured_inspect import inspect_structured, is_structured
from streaming_app.tools.structured_text import render_structured
from tests.unit.tools.test_checkpoint_inspect import build_checkpoint, make_metadata

QUERY_ID = "1341f9d1-5100-4426-876c-2754aeaca02b"
T = 1_800_000_000_000  # batch 0's timestamp; one batch a second
# The conf line of a real run's offsets/0 (PySpark 4.3.0), in Spark's key order.
CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.dropDuplicates.deterministicKeyOrder.enabled": "true",
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "2",
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": "5",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "false",
    "spark.sql.streaming.stateStore.encodingFormat": "unsaferow",
    "spark.sql.streaming.statefulOperator.useStrictDistribution": "true",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "2",
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
    "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled": "true",
    "spark.sql.streaming.aggregation.stateFormatVersion": "2",
    "spark.sql.function.protobufExtensions.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.join.stateFormatVersion": "2",
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": "false",
}  # fmt: skip
OPERATOR_PROPERTIES = {
    "timeMode": "NoTime",
    "outputMode": "Update",
    "stateVariables": [{"stateName": "total", "stateVariableType": "ValueState",
                        "ttlEnabled": False}],
}  # fmt: skip


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def offsets_entry(batch_id: int) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": T + batch_id * 1000, "conf": CONF}
    return "v1\n" + json.dumps(meta, separators=(",", ":")) + f'\n{{"logOffset":{batch_id}}}'


def source_entry(batch_id: int, *names: str) -> str:
    records = [
        json.dumps({"path": f"file:///data/in/{n}", "timestamp": T + batch_id, "batchId": batch_id},
                   separators=(",", ":"))
        for n in names
    ]  # fmt: skip
    return "\n".join(["v1", *records])


def operator_metadata(root: Path) -> str:
    record = {
        "operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateInPySparkExec"},
        "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0, "numPartitions": 2,
                            "stateSchemaFilePaths": [f"file:{root}/state/0/_stateSchema/default/"
                                                     "0_2e8e6b52-e3c3-4184-b8ef-8d391b75d751"]}],
        "operatorPropertiesJson": json.dumps(OPERATOR_PROPERTIES, separators=(",", ":")),
    }  # fmt: skip
    return "v2\n" + json.dumps(record, separators=(",", ":"))


def build_structured(root: Path, planned: int = 4, committed: int = 3) -> Path:
    """A query's checkpoint after `planned` micro-batches were planned, `committed` committed."""
    _write(root / "metadata", json.dumps({"id": QUERY_ID}, separators=(",", ":")))
    for batch_id in range(planned):
        _write(root / "offsets" / str(batch_id), offsets_entry(batch_id))
        _write(root / "offsets" / f".{batch_id}.crc", b"crc")
        _write(root / "sources" / "0" / str(batch_id), source_entry(batch_id, f"f{batch_id}.txt"))
    for batch_id in range(committed):
        _write(root / "commits" / str(batch_id), 'v1\n{"nextBatchWatermarkMs":0}')
    state = root / "state" / "0"
    _write(state / "_metadata" / "v2" / "0", operator_metadata(root))
    _write(state / "_stateSchema" / "default" / "0_2e8e6b52-e3c3-4184-b8ef-8d391b75d751", b"s")
    for partition in (0, 1):
        for version in range(1, committed + 1):  # version = batch id + 1
            _write(state / str(partition) / f"{version}.zip", b"z" * 100)
            _write(state / str(partition) / f".{version}.zip.crc", b"c")
        _write(state / str(partition) / "SSTs" / "000008-9b6e23ce.sst", b"s" * 1000)
        (state / str(partition) / "_metadata").mkdir()  # empty, as Spark leaves it
    return root


def inspect(root: Path) -> dict[str, Any]:
    return inspect_structured(LocalCheckpointFs(), str(root))


def test_query_batches_pending_sources_and_state(tmp_path: Path) -> None:
    root = build_structured(tmp_path / "ck")
    assert is_structured(LocalCheckpointFs(), str(root))
    report = inspect(root)
    assert report["engine"] == "structured"
    assert report["query"] == {"status": "ok", "id": QUERY_ID, "error": None}
    batches = report["batches"]
    assert (batches["offsets_entries"], batches["commits_entries"]) == (4, 3)
    assert (batches["last_planned"], batches["last_committed"]) == (3, 2)
    assert batches["last_committed_time_ms"] == T + 2000
    assert batches["conf"]["spark.sql.shuffle.partitions"] == "2"
    assert batches["pending"] == [
        {
            "batch_id": 3,
            "batch_time_ms": T + 3000,
            "batch_time_utc": "2027-01-15 08:00:03.000",
            "watermark_ms": 0,
            "source_offsets": [{"logOffset": 3}],
            "files": [["file:///data/in/f3.txt"]],
            "error": None,
        }
    ]
    assert report["sources"] == [{"source": 0, "entries": 4, "last_batch_id": 3}]
    [operator] = report["state"]["operators"]
    assert operator["name"] == "transformWithStateInPySparkExec"
    assert operator["state_variables"] == ["total"]
    assert (operator["partitions"], operator["declared_partitions"]) == (2, 2)
    assert operator["latest_version"] == operator["oldest_latest_version"] == 3
    assert [p["size_bytes"] for p in operator["partition_details"]] == [1303, 1303]
    assert operator["size_bytes"] == 2 * 1303 + len(operator_metadata(root)) + 1
    assert report["snapshots"]["directory"] is None
    assert report["sizes"]["entries"]["state"] == report["state"]["total_bytes"]
    assert report["notes"] == [
        "planned but not committed: micro-batch 3; a restart runs it again with the source "
        "offsets logged for it"
    ]


def test_all_committed_and_the_text(tmp_path: Path) -> None:
    root = build_structured(tmp_path / "ck", planned=3, committed=3)
    (root / "state" / "0" / "1" / "3.zip").unlink()  # partition 1 one version behind
    report = inspect(root)
    assert report["batches"]["pending"] == [] and report["notes"] == []
    text = render_structured(report)
    for line in (
        f"Engine: structured (Structured Streaming query id {QUERY_ID})",
        "  last planned: 2; last committed: 2 (2027-01-15 08:00:02.000 UTC)",
        "  shuffle (state) partitions: 2",
        "  planned but not committed: none",
        "State: 1 operator(s)",
        "transformWithStateInPySparkExec (total)",
        "  operator 0 partitions:",
    ):
        assert line in text, text
    assert "2..3" in text  # the partitions' latest versions differ


def test_files_of_a_pending_batch_from_a_compacted_source_log(tmp_path: Path) -> None:
    root = build_structured(tmp_path / "ck", planned=10, committed=9)
    compact = "\n".join(
        [source_entry(b, f"f{b}.txt") if b == 0 else source_entry(b, f"f{b}.txt")[3:]
         for b in range(10)]
    )  # fmt: skip
    for batch_id in range(10):
        (root / "sources" / "0" / str(batch_id)).unlink()
    _write(root / "sources" / "0" / "9.compact", compact)
    report = inspect(root)
    assert report["batches"]["pending"][0]["files"] == [["file:///data/in/f9.txt"]]
    assert report["sources"] == [{"source": 0, "entries": 1, "last_batch_id": 9}]


def test_a_socket_source_has_no_files_and_a_query_without_state(tmp_path: Path) -> None:
    root = build_structured(tmp_path / "ck", planned=2, committed=1)
    for name in ("sources", "state"):
        for path in sorted((root / name).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (root / name).rmdir()
    report = inspect(root)
    assert report["batches"]["pending"][0]["files"] == [None]
    assert report["sources"] == [] and report["state"] is None
    text = render_structured(report)
    assert "State: none" in text and "Source logs: none" in text


def test_partial_checkpoints_are_reported_not_raised(tmp_path: Path) -> None:
    fs = LocalCheckpointFs()
    root = build_structured(tmp_path / "ck")
    (root / "metadata").unlink()
    assert is_structured(fs, str(root))
    report = inspect(root)
    assert report["query"]["status"] == "none"
    assert report["notes"][0].startswith("no metadata file")
    (root / "metadata").write_text('{"id":')  # cut short
    (root / "offsets" / "3").write_text("v1\n{not json")
    (root / "state" / "0" / "_metadata" / "v2" / "0").write_text("garbage")
    assert is_structured(fs, str(root))
    report = inspect(root)
    assert report["query"]["status"] == "unreadable"
    pending = report["batches"]["pending"][0]
    assert pending["error"].startswith(f"{root}/offsets/3 is unreadable")
    assert report["state"]["operators"][0]["error"].endswith("is not an operator metadata file)")
    assert len(report["notes"]) == 4
    assert "offsets/3 is unreadable" in render_structured(report)


def test_no_micro_batch_yet(tmp_path: Path) -> None:
    root = tmp_path / "ck"
    _write(root / "metadata", json.dumps({"id": QUERY_ID}))
    (root / "offsets").mkdir()
    report = inspect(root)
    assert report["batches"]["last_planned"] is None and report["batches"]["pending"] == []
    assert report["notes"] == [
        "no micro-batch planned yet: a query started here begins from nothing"
    ]
    assert "last planned: none; last committed: none" in render_structured(report)


def test_dstream_checkpoints_and_other_directories_are_not_structured(tmp_path: Path) -> None:
    fs = LocalCheckpointFs()
    dstream = build_checkpoint(tmp_path / "dstream", make_metadata()).root
    assert not is_structured(fs, str(dstream))
    old = build_checkpoint(tmp_path / "old").root  # no metadata record: offsets/, commits/
    assert not is_structured(fs, str(old))
    (tmp_path / "empty").mkdir()
    assert not is_structured(fs, str(tmp_path / "empty"))
    assert not is_structured(fs, str(tmp_path / "missing"))
    (tmp_path / "file").write_text("x")
    assert not is_structured(fs, str(tmp_path / "file"))
    record = tmp_path / "record"
    record.mkdir()
    write_metadata(LocalCheckpointFs(), str(record), make_metadata())
    (record / "state").mkdir()
    assert not is_structured(fs, str(record))


def test_cli_inspect_starts_no_jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_jvm(no_verify: bool) -> None:
        raise AssertionError("a JVM was asked for")

    monkeypatch.setattr(cli_checkpoint, "_probe", no_jvm)
    root = build_structured(tmp_path / "ck")
    runner = CliRunner()
    result = runner.invoke(checkpoint, ["inspect", str(root), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["engine"] == "structured" and report["batches"]["last_committed"] == 2
    result = runner.invoke(checkpoint, ["inspect", f"file://{root}"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Checkpoint {root}\nEngine: structured (")
    assert '  3      2027-01-15 08:00:03.000  0             0:{"logOffset":3}  0: f3.txt' in (
        result.output
    )


def test_cli_inspect_an_unreadable_directory_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = build_structured(tmp_path / "ck")
    listing = LocalCheckpointFs.list_names

    def denied(self: LocalCheckpointFs, directory: str) -> list[str]:
        if directory.endswith("/state/0"):
            raise PermissionError(13, "Permission denied")
        return listing(self, directory)

    monkeypatch.setattr(LocalCheckpointFs, "list_names", denied)
    result = CliRunner().invoke(checkpoint, ["inspect", str(root)])
    assert result.exit_code == 2
    assert result.output == f"Error: {root}: Permission denied\n"


def test_the_guards_record_is_shown(tmp_path: Path) -> None:
    from streaming_app.common.fs import LocalFs
    from streaming_app.recovery.metadata import STRUCTURED_METADATA_FILE
    from streaming_app.settings.loading import load_config
    from streaming_app.structured.guard import guard_checkpoint

    root = tmp_path / "ckpt"
    assert inspect(build_structured(root))["record"] == {"status": "none", "error": None}
    cli = {"source": "kafka", "topics": "words", "checkpoint_dir": str(root)}
    (root / "metadata").rename(root / "metadata.kept")  # a new checkpoint for the guard
    guard_checkpoint(LocalFs(), load_config(None, {}, cli), 2)
    (root / "metadata.kept").rename(root / "metadata")
    report = inspect(root)
    assert report["record"]["status"] == "ok" and report["record"]["engine"] == "structured"
    assert report["record"]["settings"]["topics"] == ["words"]
    text = render_structured(report)
    assert (
        "Written by streaming_app " in text and " (engine structured); guarded settings: " in text
    )
    assert " job=wordcount " in text and " source=kafka " in text and " topics=words" in text
    (root / STRUCTURED_METADATA_FILE).write_text("{")
    report = inspect(root)
    assert report["record"]["status"] == "unreadable"
    assert any("a run refuses the checkpoint" in note for note in report["notes"])
