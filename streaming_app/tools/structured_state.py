"""The state of a Structured Streaming checkpoint, by a file walk: operators, partitions, sizes.

`state/<operator>/<partition>/` holds a state store's versions (version = batch id + 1):
`<v>.zip` (+ `SSTs/`) and `<v>.changelog` for RocksDB, `<v>.delta` and `<v>.snapshot` for
the default provider, `<v>_<unique id>.<ext>` with checkpoint format 2; a join keeps one
such store per subfolder. `state/<operator>/_metadata/` says what the operator is: `metadata`
(format 1) or `v2/<batch id>` (transformWithState, with its state variables). Walking the
files needs no JVM, unlike Spark's `state-metadata` data source, and reads the same facts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from streaming_app.common.fs import join
from streaming_app.recovery.spark_checkpoint import CheckpointFs

STATE = "state"
# `12.zip`, `12.changelog`, `12.delta`, `12.snapshot`, `12_<uuid>.zip` (checkpoint format 2).
_VERSION_FILE = re.compile(r"^(\d+)(?:_[0-9A-Za-z-]+)?\.(?:zip|changelog|delta|snapshot)$")
_SST_DIR = "SSTs"


def state_section(fs: CheckpointFs, checkpoint_dir: str) -> dict[str, Any] | None:
    """The `state` section of the report; None if the query keeps no state (yet)."""
    directory = join(checkpoint_dir, STATE)
    if not fs.is_dir(directory):
        return None
    operators = [
        operator_entry(fs, join(directory, name), int(name))
        for name in sorted(fs.list_names(directory), key=_number)
        if name.isdigit() and fs.is_dir(join(directory, name))
    ]
    return {
        "directory": directory,
        "operators": operators,
        "total_bytes": fs.size(directory),
    }


def operator_entry(fs: CheckpointFs, directory: str, operator_id: int) -> dict[str, Any]:
    """One operator: what it is (from its metadata), its partitions, their sizes and versions."""
    partitions = [
        partition_entry(fs, join(directory, name), int(name))
        for name in sorted(fs.list_names(directory), key=_number)
        if name.isdigit() and fs.is_dir(join(directory, name))
    ]
    versions = [p["latest_version"] for p in partitions if p["latest_version"] is not None]
    entry: dict[str, Any] = {
        "operator_id": operator_id,
        "name": None,
        "state_variables": [],
        "declared_partitions": None,
        "partitions": len(partitions),
        "size_bytes": fs.size(directory),
        "latest_version": max(versions) if versions else None,
        "oldest_latest_version": min(versions) if versions else None,
        "partition_details": partitions,
        "error": None,
    }
    try:
        entry.update(_operator_metadata(fs, directory))
    except (OSError, ValueError, UnicodeDecodeError, AttributeError, TypeError) as exc:
        entry["error"] = f"{join(directory, '_metadata')} is unreadable ({exc})"
    return entry


def partition_entry(fs: CheckpointFs, directory: str, partition: int) -> dict[str, Any]:
    """One state partition: bytes on disk and the newest state version written there."""
    versions = _versions(fs, directory)
    for name in fs.list_names(directory):  # a join's stores are subfolders
        path = join(directory, name)
        if name != _SST_DIR and not name.startswith(".") and fs.is_dir(path):
            versions += _versions(fs, path)
    return {
        "partition": partition,
        "size_bytes": fs.size(directory),
        "latest_version": max(versions) if versions else None,
    }


def _versions(fs: CheckpointFs, directory: str) -> list[int]:
    return [int(m[1]) for name in fs.list_names(directory) if (m := _VERSION_FILE.match(name))]


def _operator_metadata(fs: CheckpointFs, directory: str) -> dict[str, Any]:
    """Name, state variables and partition count from the newest operator metadata file."""
    meta_dir = join(directory, "_metadata")
    v2_dir = join(meta_dir, "v2")
    batches = sorted((int(n) for n in fs.list_names(v2_dir) if n.isdigit()), reverse=True)
    if batches:
        path = join(v2_dir, str(batches[0]))
    elif fs.exists(join(meta_dir, "metadata")):
        path = join(meta_dir, "metadata")
    else:
        return {}
    lines = fs.read_bytes(path).decode("utf-8").splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise ValueError(f"{path} is not an operator metadata file")
    record = json.loads(lines[1])
    stores = record.get("stateStoreInfo") or []
    counts = {s.get("numPartitions") for s in stores}
    properties = json.loads(record.get("operatorPropertiesJson") or "{}")
    return {
        "name": record["operatorInfo"].get("operatorName"),
        "state_variables": [v.get("stateName") for v in properties.get("stateVariables", [])],
        "declared_partitions": counts.pop() if len(counts) == 1 else None,
    }


def _number(name: str) -> tuple[int, str]:
    return (int(name), name) if name.isdigit() else (-1, name)
