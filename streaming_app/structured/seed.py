"""Restoring a snapshot into a new structured query: the seed record and the initial state.

Driver side. `--restore-from-snapshot` on a new checkpoint directory: the snapshot (either
engine's, resolved and checked as for DStreams: recovery/guard.py `seed_at`) is recorded
in the checkpoint directory before the query starts, because transformWithState applies
its `initialState` in micro-batch 0 only, and a driver killed before micro-batch 0 commits
must seed it again on restart. The initial state is read and shaped on the executors.
Kafka resumes at the snapshot's offsets (recovery/restore.py `seeded_config`). Spark's file
source has no way to skip files: a new query counts every file in `input_dir` in its first
micro-batch, so the counts of the files the snapshot includes are taken off the seed.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import FileSystem, join
from streaming_app.errors import CheckpointError, ConfigError
from streaming_app.jobs.counting import reduce_functions
from streaming_app.recovery.guard import seed_at
from streaming_app.recovery.metadata import STRUCTURED_METADATA_FILE
from streaming_app.recovery.restore import Seed, describe_seed, files_counts, hadoop_literal
from streaming_app.recovery.snapshots import Manifest, parse_line
from streaming_app.settings.schema import AppConfig
from streaming_app.sinks.files_layout import format_value
from streaming_app.sources.files_log import visible_names
from streaming_app.structured.query_log import COMMITS, last_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

SEED_RECORD = "restored-from-snapshot.json"
SEED_SCHEMA = "key string, total string"


def plan_seed(fs: FileSystem, config: AppConfig) -> Seed | None:
    """The snapshot this start seeds the query from, None if none (a recovery, or no restore).

    Raises ConfigError for a restore into a checkpoint that holds a query already.
    """
    ckpt = config.checkpoint_dir
    recorded = read_seed_record(fs, ckpt)
    if recorded is not None:
        if last_batch(fs, join(ckpt, COMMITS)) is not None:
            if config.restore_from_snapshot:
                log.info(
                    "the checkpoint was already seeded from %s; recovering it "
                    "(restore_from_snapshot %s applies to a new checkpoint only)",
                    recorded.path,
                    config.restore_from_snapshot,
                )
            return None
        log.warning(
            "the query was seeded from %s and stopped before its first micro-batch committed; "
            "seeding it again",
            recorded.path,
        )
        return recorded
    if not config.restore_from_snapshot:
        return None
    # The guard's record alone is no checkpoint: it is rewritten until a micro-batch is planned.
    if [n for n in fs.list_names(ckpt) if not n.startswith(".") and n != STRUCTURED_METADATA_FILE]:
        raise ConfigError(
            f"restore_from_snapshot: checkpoint_dir {ckpt} already holds a checkpoint; "
            "restore into a new, empty checkpoint directory (or move this one aside)"
        )
    seed = seed_at(config.restore_from_snapshot)
    record = {"snapshot": seed.path, "manifest": seed.manifest.to_json()}
    fs.write_atomic(join(ckpt, SEED_RECORD), (json.dumps(record, sort_keys=True) + "\n").encode())
    return seed


def read_seed_record(fs: FileSystem, checkpoint_dir: str) -> Seed | None:
    """The snapshot a checkpoint was seeded from (its record), None if it was not."""
    path = join(checkpoint_dir, SEED_RECORD)
    if not fs.exists(path):
        return None
    try:
        record = json.loads(fs.read_bytes(path).decode("utf-8"))
        return Seed(str(record["snapshot"]), Manifest.from_json(record["manifest"]))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is unreadable ({exc})") from None


def initial_state(spark: SparkSession, config: AppConfig, seed: Seed) -> DataFrame:
    """The totals a restored query starts from, as (key, total text) rows, built on the executors.

    With the files source, the counts of the input files the snapshot includes and that
    are still in `input_dir` are taken off: the query's first micro-batch counts them again.
    """
    from streaming_app.common.hadoop_fs import HadoopFs

    sc = spark.sparkContext
    totals = sc.textFile(join(hadoop_literal(seed.path), "part-*")).map(parse_line)
    again: list[str] = []
    if config.source == "files" and seed.manifest.source == "files":
        assert config.input_dir is not None
        present = set(visible_names(HadoopFs(sc, config.input_dir).list_names(config.input_dir)))
        again = sorted(present & set(seed.manifest.files()))
    if again:
        counted = files_counts(sc, config, again).map(negated)
        totals = totals.union(counted).reduceByKey(reduce_functions(config)[0])
    log.info(
        "Seeding the new query from snapshot %s (%s engine): %s%s",
        seed.path,
        seed.manifest.engine,
        describe_seed(seed, config),
        f"; {len(again)} input file(s) it includes are counted again by the first "
        "micro-batch and taken off the seed"
        if again
        else "",
    )
    return spark.createDataFrame(totals.map(seed_row), SEED_SCHEMA)


def negated(pair: tuple[str, Any]) -> tuple[str, Any]:
    """A key's count or sum, negated: taken off the seed."""
    return pair[0], -pair[1]


def seed_row(pair: tuple[str, Any]) -> tuple[str, str]:
    """A (key, total) pair as an initial state row: the total as text, as the state keeps it."""
    return pair[0], format_value(pair[1])


def seed_totals(fs: FileSystem, checkpoint_dir: str) -> dict[str, Any]:
    """Every total of the snapshot the checkpoint was seeded from ({} if not), on the driver.

    For the files sink's first base: its changes replace the totals micro-batch 0 changed.
    """
    seed = read_seed_record(fs, checkpoint_dir)
    if seed is None:
        return {}
    totals: dict[str, Any] = {}
    for name in sorted(fs.list_names(seed.path)):
        if name.startswith("part-"):
            text = fs.read_bytes(join(seed.path, name)).decode("utf-8")
            totals.update(parse_line(line) for line in text.splitlines() if line)
    return totals
