"""The checkpoint's `metadata` record: who wrote it, with which versions and settings."""

from __future__ import annotations

import hashlib
import json
import platform
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from streaming_app import __version__
from streaming_app.common.fs import FileSystem, join
from streaming_app.errors import CheckpointError
from streaming_app.settings.schema import AppConfig

METADATA_FILE = "metadata"
# The structured engine's record: next to Spark's own `metadata` file (the query id).
STRUCTURED_METADATA_FILE = "streaming_app_metadata.json"
METADATA_FORMAT = "streaming-app-checkpoint-metadata"
METADATA_VERSION = 1

# Settings captured into the DStream graph when a context is created: a recovered run
# keeps the checkpoint's values whatever today's config says, so a change needs a new
# checkpoint. Left out: what is read from today's config on every start (master, log
# level, duration, brokers, credentials, the out-of-range policy, the postgres DSN) and
# starting_offsets, which only a new stream reads.
GRAPH_SETTINGS = (
    "source",
    "batch_interval",
    "checkpoint_interval",
    "host",
    "port",
    "input_dir",
    "topics",
    "max_rate_per_partition",
    "group_id",
    "max_value_bytes",
    "token_pattern",
    "lowercase",
    "sinks",
    "output_dir",
    "top_n",
    "output_keep",
    "postgres_table",
    "snapshot_interval",
    "snapshot_dir",
    "snapshot_keep",
)


# Graph settings added after checkpoints were first written: recorded only when they
# differ from these values, so that older checkpoints (which lack them) keep matching.
LATER_GRAPH_SETTINGS: dict[str, Any] = {
    "job": "wordcount",
    "window": None,
    "slide": None,
    "csv_fields": [],
    "key_field": None,
    "value_field": None,
    "csv_delimiter": ",",
    "csv_header": True,
    # Checkpoints from before state buckets keep one state record per key.
    "state_buckets": 0,
    # In ms, recorded when it is not the checkpoint interval (the default).
    "output_base_interval": None,
}


def graph_settings(config: AppConfig) -> dict[str, Any]:
    """The graph-shaping settings of a config as JSON values (intervals in ms)."""
    values: dict[str, Any] = {}
    value: Any
    for key, unset in LATER_GRAPH_SETTINGS.items():
        value = getattr(config, key)
        if key == "window":
            value = config.window_ms
        elif key == "slide":
            value = config.slide_ms if config.window is not None else None
        elif key == "output_base_interval":
            base_ms = config.output_base_ms
            value = None if base_ms == config.checkpoint_ms else base_ms
        elif isinstance(value, tuple):
            value = list(value)
        if value != unset:
            values[key] = value
    for key in GRAPH_SETTINGS:
        value = getattr(config, key)
        if key == "batch_interval":
            value = config.batch_ms
        elif key == "checkpoint_interval":
            value = config.checkpoint_ms
        elif key == "snapshot_interval":
            value = config.snapshot_ms
        elif key == "snapshot_dir":
            value = config.snapshots_at
        elif isinstance(value, tuple):
            value = list(value)
        values[key] = value
    return values


# Recorded, but a recovered checkpoint keeps its own value whatever the config says, and
# any value gives the same results: a different one is no reason to refuse a checkpoint.
KEPT_BY_CHECKPOINT = ("state_buckets",)


def fingerprint(settings: dict[str, Any]) -> str:
    """A short, stable hash of the graph-shaping settings (but KEPT_BY_CHECKPOINT)."""
    compared = {k: v for k, v in settings.items() if k not in KEPT_BY_CHECKPOINT}
    canonical = json.dumps(compared, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def runtime_versions() -> dict[str, str]:
    """Versions of what reads a checkpoint: this app, Spark, Python and cloudpickle."""
    import pyspark
    from pyspark import cloudpickle

    return {
        "app_version": __version__,
        "spark_version": pyspark.__version__,
        "python_version": platform.python_version(),
        "cloudpickle_version": str(cloudpickle.__version__),
    }


@dataclass(frozen=True)
class CheckpointMetadata:
    """What the `metadata` file says about the checkpoint next to it."""

    app_id: str
    created_at_ms: int
    app_version: str
    spark_version: str
    python_version: str
    cloudpickle_version: str
    source: str
    batch_ms: int
    checkpoint_ms: int
    settings_fingerprint: str
    settings: dict[str, Any] = field(default_factory=dict)
    seeded_from: str | None = None  # the snapshot a restored context started from
    seeded_batch_ms: int | None = None
    # Which engine's checkpoint: `dstream` (records from before the field are), `structured`.
    engine: str = "dstream"

    @classmethod
    def for_config(
        cls, config: AppConfig, seeded_from: str | None = None, seeded_batch_ms: int | None = None
    ) -> CheckpointMetadata:
        """The record of a context created now from `config`."""
        settings = graph_settings(config)
        return cls(
            app_id=uuid.uuid4().hex,
            created_at_ms=int(time.time() * 1000),
            **runtime_versions(),
            source=config.source,
            batch_ms=config.batch_ms,
            checkpoint_ms=config.checkpoint_ms,
            settings_fingerprint=fingerprint(settings),
            settings=settings,
            seeded_from=seeded_from,
            seeded_batch_ms=seeded_batch_ms,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as written to the file."""
        return {"format": METADATA_FORMAT, "version": METADATA_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, record: Any) -> CheckpointMetadata:
        """Parse a record; raises ValueError if it is not one."""
        if not isinstance(record, dict) or record.get("format") != METADATA_FORMAT:
            raise ValueError("not a streaming_app metadata record")
        if record.get("version") != METADATA_VERSION:
            raise ValueError(f"metadata version {record.get('version')} is not supported")
        names = cls.__dataclass_fields__
        try:
            return cls(**{k: v for k, v in record.items() if k in names})
        except TypeError as exc:
            raise ValueError(f"incomplete metadata record ({exc})") from None


def write_metadata(
    fs: FileSystem, checkpoint_dir: str, metadata: CheckpointMetadata, name: str = METADATA_FILE
) -> None:
    """Write (or replace) the record, atomically (`name`: the structured engine's file)."""
    fs.mkdirs(checkpoint_dir)
    body = json.dumps(metadata.to_json(), indent=2, sort_keys=True) + "\n"
    fs.write_atomic(join(checkpoint_dir, name), body.encode("utf-8"))


def read_metadata(
    fs: FileSystem, checkpoint_dir: str, name: str = METADATA_FILE
) -> CheckpointMetadata | None:
    """The record next to a checkpoint, None if there is none; CheckpointError if unreadable."""
    path = join(checkpoint_dir, name)
    if not fs.exists(path):
        return None
    try:
        return CheckpointMetadata.from_json(json.loads(fs.read_bytes(path).decode("utf-8")))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is unreadable ({exc})") from None


def metadata_json(fs: FileSystem, checkpoint_dir: str) -> object:
    """The JSON of the `metadata` file there, whoever wrote it (this engine's record, or a
    Structured Streaming query's `{"id": ...}`); None if it is missing or not JSON."""
    if METADATA_FILE not in fs.list_names(checkpoint_dir):
        return None
    try:
        return json.loads(fs.read_bytes(join(checkpoint_dir, METADATA_FILE)).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def minor(version: str) -> str:
    """`4.3` of `4.3.0`."""
    return ".".join(version.split(".")[:2])


def _seconds(ms: Any) -> str:
    return f"{ms / 1000:g} s" if isinstance(ms, int) else repr(ms)


# Settings in ms, shown in seconds when they differ.
_INTERVALS = (
    "batch_interval",
    "checkpoint_interval",
    "snapshot_interval",
    "output_base_interval",
    "window",
    "slide",
)


def setting_changes(
    recorded: dict[str, Any],
    current: dict[str, Any],
    keys: Iterable[str],
    unset: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> list[str]:
    """`key was -> now` for each of `keys` whose value differs (a missing one counts as
    its `unset` value, else None); `labels` names a key for people."""
    found = []
    for key in keys:
        default = (unset or {}).get(key)
        was, now = recorded.get(key, default), current.get(key, default)
        if was != now:
            if key in _INTERVALS:
                was, now = _seconds(was), _seconds(now)
            found.append(f"{(labels or {}).get(key, key)} {was} -> {now}")
    return found


# App versions whose checkpoints this version recovers as they are: the graph a checkpoint
# pickles names the same functions and holds the same records (test_checkpoint_references,
# test_upgrade_from_releases). 0.5.4's graph hands the state a batch's bucket dicts as the
# shuffle leaves them, which 0.5.3's merge cannot take (so 0.5.3 refuses a 0.5.4 checkpoint
# by its version), and 0.5.4's merge still takes the reduced ones of the graphs before.
# 0.5.0 added the postgres sink's staging table, not a change to the checkpoint; 0.5.1
# added a reference (the files source's late files read the newest snapshot's list), so
# 0.5.0 cannot load its checkpoints, but 0.5.1 loads 0.5.0's;
# 0.5.2 changed the Prometheus series and settings, 0.5.3 the postgres totals table's
# fillfactor, neither the checkpoint (0.5.2 left 0.5.1 out of this set by mistake, and
# refused 0.5.1's checkpoints, which upgrades.md says it recovers).
RECOVERED_AS_IS = frozenset({"0.4.0", "0.5.0", "0.5.1", "0.5.2", "0.5.3", __version__})


def differences(recorded: CheckpointMetadata, current: CheckpointMetadata) -> list[str]:
    """Why a checkpoint written as `recorded` cannot be recovered by `current` (empty: it can).

    Any other app, Spark or cloudpickle version, or Python minor version, may fail to
    unpickle the graph or read it differently; changed graph settings would be ignored.
    """
    found = []
    for key in ("app_version", "spark_version", "cloudpickle_version"):
        was, now = getattr(recorded, key), getattr(current, key)
        if key == "app_version" and was in RECOVERED_AS_IS and now == __version__:
            continue
        if was != now:
            found.append(f"{key.replace('_version', '')} version {was} -> {now}")
    if minor(recorded.python_version) != minor(current.python_version):
        found.append(f"python version {recorded.python_version} -> {current.python_version}")
    if recorded.settings_fingerprint != current.settings_fingerprint:
        keys = [k for k in (*GRAPH_SETTINGS, *LATER_GRAPH_SETTINGS) if k not in KEPT_BY_CHECKPOINT]
        found += setting_changes(recorded.settings, current.settings, keys, LATER_GRAPH_SETTINGS)
        if not found:
            found.append("settings fingerprint differs")
    return found
