"""Restoring a snapshot into a new structured query: the seed record and the seed input.

Driver side. `--restore-from-snapshot` on a new checkpoint directory: the snapshot (either
engine's, resolved and checked as for DStreams: recovery/guard.py `seed_at`) is recorded
in the checkpoint directory before the query starts. Its totals then become the query's
second input: an executor job writes them as JSON lines into `seed-input/` in the
checkpoint (temp + rename, once), and Spark's file source reads that directory in
micro-batch 0, unioned with the configured source's pairs before the aggregation. Spark
logs that it read those files (`sources/1/`), so the seed counts once, whatever dies when;
every later micro-batch finds nothing new there. Kafka resumes at the snapshot's offsets
(recovery/restore.py `seeded_config`). Spark's file source has no way to skip files: a
new query counts every file in `input_dir` in its first micro-batch, so the counts of the
files the snapshot includes are taken off the seed. Nothing passes through the driver.
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from functools import partial
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
from streaming_app.structured.state_layout import KEY, VALUE, fits, value_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

SEED_RECORD = "restored-from-snapshot.json"
SEED_INPUT = "seed-input"  # the seed's totals, the query's second input (file source)
SUCCESS = "_SUCCESS"


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


def seed_input(checkpoint_dir: str) -> str:
    """The directory of a seeded query's second input: the snapshot's totals."""
    return join(checkpoint_dir, SEED_INPUT)


def write_seed_input(spark: SparkSession, config: AppConfig, seed: Seed) -> None:
    """Write the seed's totals into the checkpoint for the query to read, unless written.

    With the files source, the counts of the input files the snapshot includes and that
    are still in `input_dir` are taken off: the query's first micro-batch counts them again.
    A total the state's type cannot hold exactly refuses the restore (ConfigError).
    """
    from streaming_app.common.hadoop_fs import HadoopFs

    sc = spark.sparkContext
    fs = HadoopFs(sc, config.checkpoint_dir)
    final = seed_input(config.checkpoint_dir)
    if fs.exists(join(final, SUCCESS)):
        return  # written by a start killed before micro-batch 0 committed
    totals = sc.textFile(join(hadoop_literal(seed.path), "part-*")).map(parse_line)
    again: list[str] = []
    if config.source == "files" and seed.manifest.source == "files":
        assert config.input_dir is not None
        present = set(visible_names(HadoopFs(sc, config.input_dir).list_names(config.input_dir)))
        again = sorted(present & set(seed.manifest.files()))
    if again:
        counted = files_counts(sc, config, again).map(negated)
        totals = totals.union(counted).reduceByKey(reduce_functions(config)[0])
    if config.job == "keyed-sum":
        inexact = totals.filter(partial(not_exact, config.sum_scale)).count()
        if inexact:
            raise ConfigError(
                f"restore_from_snapshot: {inexact} total(s) of {seed.path} are not exact in "
                f"decimal(38, {config.sum_scale}); restore with a sum_scale that holds them"
            )
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
    temp = final + ".tmp"
    fs.delete(temp)  # left over from a start killed while writing it
    totals.map(seed_line).saveAsTextFile(temp)
    fs.publish_dir(temp, final)


def not_exact(scale: int, pair: tuple[str, Any]) -> bool:
    """Whether a keyed-sum seed total cannot be held exactly by decimal(38, scale)."""
    return not fits(Decimal(pair[1]), scale)


def negated(pair: tuple[str, Any]) -> tuple[str, Any]:
    """A key's count or sum, negated: taken off the seed."""
    return pair[0], -pair[1]


def seed_line(pair: tuple[str, Any]) -> str:
    """A (key, total) pair as a JSON line of the seed input: the total as exact text."""
    return json.dumps({KEY: pair[0], VALUE: format_value(pair[1])}, ensure_ascii=False)


def seed_pairs(spark: SparkSession, config: AppConfig) -> DataFrame:
    """The seed input as a stream of (key, value) pairs: read once, in micro-batch 0."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)

    lines = spark.readStream.schema(f"{KEY} string, {VALUE} string").json(
        seed_input(config.checkpoint_dir)
    )
    kind = value_type(config.job, config.sum_scale)
    return lines.select(KEY, F.col(VALUE).cast(kind).alias(VALUE))
