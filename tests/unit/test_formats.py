"""Every format the app leaves on disk, in a table or on its endpoint is recorded with the
version that has it: a change to one fails here until it has a new version (or is recorded
for the unreleased one), with a CHANGELOG line.

Each format is described by what defines it (a record's fields, a table's DDL, a file
name's pattern, a series' name and labels), not by its code's text: a refactor that keeps
the format passes. When this fails:

1. If the change is to a released format, raise `streaming_app.__version__` (0.5.0 ->
   0.6.0) and say in CHANGELOG.md what changed and the way back.
2. Record the fingerprints the failure prints under that version in RECORDED (a version
   not yet released may be re-recorded, with its CHANGELOG line updated).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import re
from collections.abc import Callable
from typing import Any

from streaming_app import __version__

# The fingerprints of each version's formats (the newest version's must match the code).
RECORDED: dict[str, dict[str, str]] = {
    "0.5.0": {
        "checkpoint metadata": "694427666892",
        "files sink layout": "f0f6d3af1bbf",
        "files source log": "6744380b5366",
        "kafka offset and commit logs": "9789e7ca5ff4",
        "metrics file record": "1532bdd5ea1d",
        "postgres tables": "7d266297a7c9",
        "prometheus series": "0ceee628ed83",
        "snapshot manifest": "5c7d4e6a9803",
        "state bucket record": "fb07c4437456",
        "structured checkpoint": "138d8aaff10d",
    },
    "0.5.1": {
        "checkpoint metadata": "694427666892",
        "files sink layout": "f0f6d3af1bbf",
        "files source log": "6744380b5366",
        "kafka offset and commit logs": "9789e7ca5ff4",
        "metrics file record": "1532bdd5ea1d",
        "postgres tables": "7d266297a7c9",
        "prometheus series": "0ceee628ed83",
        "snapshot manifest": "5c7d4e6a9803",
        "state bucket record": "fb07c4437456",
        "structured checkpoint": "138d8aaff10d",
    },
    "0.5.2": {
        "checkpoint metadata": "694427666892",
        "files sink layout": "f0f6d3af1bbf",
        "files source log": "6744380b5366",
        "kafka offset and commit logs": "9789e7ca5ff4",
        "metrics file record": "1532bdd5ea1d",
        "postgres tables": "7d266297a7c9",
        "prometheus series": "231ad8e0da1e",
        "snapshot manifest": "5c7d4e6a9803",
        "state bucket record": "fb07c4437456",
        "structured checkpoint": "138d8aaff10d",
    },
    "0.5.3": {
        "checkpoint metadata": "694427666892",
        "files sink layout": "f0f6d3af1bbf",
        "files source log": "6744380b5366",
        "kafka offset and commit logs": "9789e7ca5ff4",
        "metrics file record": "1532bdd5ea1d",
        "postgres tables": "f41246997b40",
        "prometheus series": "231ad8e0da1e",
        "snapshot manifest": "5c7d4e6a9803",
        "state bucket record": "fb07c4437456",
        "structured checkpoint": "138d8aaff10d",
    },
    "0.5.4": {
        "checkpoint metadata": "694427666892",
        "files sink layout": "f0f6d3af1bbf",
        "files source log": "6744380b5366",
        "kafka offset and commit logs": "9789e7ca5ff4",
        "metrics file record": "1532bdd5ea1d",
        "postgres tables": "f41246997b40",
        "prometheus series": "231ad8e0da1e",
        "snapshot manifest": "5c7d4e6a9803",
        "state bucket record": "fb07c4437456",
        "structured checkpoint": "138d8aaff10d",
    },
}


def _fields(cls: Any) -> list[tuple[str, str]]:
    if dataclasses.is_dataclass(cls):
        return [(f.name, str(f.type)) for f in dataclasses.fields(cls)]
    return [(name, str(cls.__annotations__[name])) for name in cls._fields]  # NamedTuple


def checkpoint_metadata() -> Any:
    from streaming_app.recovery import metadata

    return [
        metadata.METADATA_FILE, metadata.STRUCTURED_METADATA_FILE, metadata.METADATA_FORMAT,
        metadata.METADATA_VERSION, _fields(metadata.CheckpointMetadata),
        list(metadata.GRAPH_SETTINGS),
    ]  # fmt: skip


def files_sink_layout() -> Any:
    from streaming_app.sinks import files_layout

    return [
        files_layout.TOTALS, files_layout.DELTA, files_layout.WINDOW,
        files_layout.SUCCESS_MARKER, files_layout.CHAIN_MARKER, files_layout.LINK_KINDS,
        files_layout._NAME.pattern, _fields(files_layout.Link),
    ]  # fmt: skip


def kafka_logs() -> Any:
    from streaming_app.common.checkpoint_files import CHECKPOINT_FILE
    from streaming_app.sources.kafka import offset_log

    return [
        offset_log.OFFSETS_DIR, offset_log.COMMITS_DIR, CHECKPOINT_FILE.pattern,
        # The keys each record is written with.
        sorted(set(re.findall(r'"([a-z_]+)":', inspect.getsource(offset_log)))),
    ]  # fmt: skip


def files_source_log() -> Any:
    from streaming_app.sources import files_log

    return [
        files_log.INPUT_FILES_DIR,
        sorted(set(re.findall(r'"([a-z_]+)":', inspect.getsource(files_log)))),
    ]


def structured_checkpoint() -> Any:
    """The structured engine's own records in its checkpoint: Spark's query logs as the app
    reads them, the state's layout, the guard's settings, the seed, the Kafka offsets."""
    from streaming_app.structured import guard, kafka_offsets, query_log, seed, source_log
    from streaming_app.structured import state_layout as layout

    return [
        query_log.OFFSETS, query_log.COMMITS, query_log.METADATA,
        _fields(query_log.OffsetsEntry), source_log.SOURCES, source_log.COMPACT,
        layout.KEY, layout.VALUE, layout.TOTAL, layout.SUM_FIELD, layout.PRECISION,
        layout.state_layout("wordcount", 0), layout.state_layout("keyed-sum", 2, 10_000, 2_000),
        list(guard.GUARDED), list(guard.ALWAYS_COMPARED), guard.UNSET,
        seed.SEED_RECORD, seed.SEED_INPUT, seed.SUCCESS,
        sorted(set(re.findall(r'"([a-z_]+)":', inspect.getsource(seed)))),
        seed.seed_line(("w", 3)), kafka_offsets.to_json({("t", 0): 42}),
    ]  # fmt: skip


def metrics_file_record() -> Any:
    from streaming_app.common.metrics_record import BatchMetrics

    return _fields(BatchMetrics)


def postgres_tables() -> Any:
    """The DDL of the sink's tables, as the code has it."""
    from streaming_app.sinks.postgres import schema

    text = inspect.getsource(schema)
    found = re.findall(r'"(CREATE [^"]*(?:"\s*"[^"]*)*)"', text)
    return [" ".join(re.sub(r'"\s*"', "", ddl).split()) for ddl in found]  # literals joined


def prometheus_series() -> Any:
    """Each series' name, type and labels, once a Kafka batch completed."""
    from prometheus_client.parser import text_string_to_metric_families

    from streaming_app.common.metrics_record import BatchMetrics
    from streaming_app.common.prometheus import Endpoint, PartitionPosition

    info = {"version": "v", "engine": "e", "app_job": "j", "source": "kafka", "sinks": "files"}
    served = Endpoint(info)
    batch = BatchMetrics(2000, 2000, 10, 5, 0, 5, None, 2100, words=9, state_keys=3)
    served.observe(batch, False, [PartitionPosition("t", 0, 5, 9)])
    served.snapshot_interval.set(10)
    served.checkpoint_interval.set(10)
    served.succeeded("snapshot", 1.0)
    from prometheus_client import generate_latest

    families = text_string_to_metric_families(generate_latest(served.registry).decode())
    return sorted(  # the app's own: prometheus_client's process_* and python_* are its
        (family.name, family.type, sorted({k for s in family.samples for k in s.labels}))
        for family in families
        if family.name.startswith("streaming_app_")
    )


def snapshot_manifest() -> Any:
    from streaming_app.recovery import snapshots

    return [
        snapshots.SNAPSHOT_FORMAT, snapshots.SNAPSHOT_VERSION, snapshots.MANIFEST,
        snapshots.SNAPSHOT_PREFIX, _fields(snapshots.Manifest),
    ]  # fmt: skip


def state_bucket_record() -> Any:
    from streaming_app.state import buckets

    return [_fields(buckets.Bucket), buckets.NO_BUCKET, buckets._MARSHAL, buckets._PICKLE]


FORMATS: dict[str, Callable[[], Any]] = {
    "checkpoint metadata": checkpoint_metadata,
    "files sink layout": files_sink_layout,
    "files source log": files_source_log,
    "kafka offset and commit logs": kafka_logs,
    "metrics file record": metrics_file_record,
    "postgres tables": postgres_tables,
    "prometheus series": prometheus_series,
    "snapshot manifest": snapshot_manifest,
    "state bucket record": state_bucket_record,
    "structured checkpoint": structured_checkpoint,
}


def fingerprint(description: Any) -> str:
    text = json.dumps(description, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def test_every_format_is_described() -> None:
    for name, describe in FORMATS.items():
        assert describe(), f"{name}: nothing describes it"
    assert len(postgres_tables()) == 4  # totals, progress, staging, window


def test_every_format_is_recorded_with_the_version_that_has_it() -> None:
    assert __version__ in RECORDED, (
        f"version {__version__} has no fingerprints: record them (see this module's docstring)"
    )
    found = {name: fingerprint(describe()) for name, describe in FORMATS.items()}
    changed = {n: f for n, f in found.items() if RECORDED[__version__].get(n) != f}
    assert not changed, (
        f"formats changed since version {__version__} was recorded: {sorted(changed)}. "
        "Give a released format's change a new version and a CHANGELOG line, then record "
        f"{json.dumps(found, indent=8, sort_keys=True)} under it in RECORDED"
    )


def test_the_changelog_has_every_recorded_version_and_its_formats() -> None:
    from pathlib import Path

    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text("utf-8")
    sections = re.split(r"^## ", changelog, flags=re.M)[1:]
    by_version = {section.split(" ", 1)[0]: section for section in sections}
    for version in {__version__, *RECORDED}:
        assert version in by_version, f"CHANGELOG.md has no section for {version}"
        assert "\n### Formats\n" in by_version[version], f"{version}: no Formats in it"
