"""Seeding a new context from a snapshot: the initial state and where each source resumes."""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streaming_app.common.fs import join
from streaming_app.jobs.counting import pre_aggregated, reduce_functions, values_only
from streaming_app.recovery.snapshots import Manifest, parse_line, starting_offsets_spec
from streaming_app.settings.schema import AppConfig
from streaming_app.sources.files_log import visible_names

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Seed:
    """A snapshot a new context starts from."""

    path: str
    manifest: Manifest


def hadoop_literal(path: str) -> str:
    """A path that Hadoop's input formats take literally (no glob, no comma splitting)."""
    return re.sub(r"([\\,*?\[\]{}])", r"\\\1", path)


def seeded_config(config: AppConfig, seed: Seed) -> AppConfig:
    """The config of a context seeded from `seed`: Kafka resumes at the snapshot's offsets."""
    if config.source != seed.manifest.source:
        log.warning(
            "restoring a %s snapshot into a %s stream: the totals carry over, the source "
            "position does not",
            seed.manifest.source,
            config.source,
        )
    if config.source != "kafka" or seed.manifest.source != "kafka":
        return config
    spec = starting_offsets_spec(seed.manifest, config.topics)
    if spec is None:
        log.warning(
            "the snapshot has no offsets of topics %s: reading them from the start",
            ",".join(config.topics),
        )
        return dataclasses.replace(config, starting_offsets="earliest")
    return dataclasses.replace(config, starting_offsets=spec)


def seed_state(
    sc: SparkContext, config: AppConfig, seed: Seed
) -> tuple[RDD[tuple[str, int]], frozenset[str]]:
    """The initial totals of a restored context, and the input files counted into them.

    For the files source, files in the input directory that the snapshot does not
    include (they arrived, or were read by the old run, after the snapshot) are counted
    here: the new stream only sees files that appear after it starts.
    """
    from streaming_app.common.hadoop_fs import HadoopFs

    totals: RDD[tuple[str, int]] = sc.textFile(join(hadoop_literal(seed.path), "part-*")).map(
        parse_line
    )
    extra: list[str] = []
    if config.source == "files" and seed.manifest.source == "files":
        assert config.input_dir is not None
        counted = set(seed.manifest.files())
        present = visible_names(HadoopFs(sc, config.input_dir).list_names(config.input_dir))
        extra = sorted(name for name in present if name not in counted)
    if extra:
        totals = totals.union(files_counts(sc, config, extra)).reduceByKey(
            reduce_functions(config)[0]
        )
    log.info(
        "Seeding the new context from snapshot %s: %s%s",
        seed.path,
        describe_seed(seed, config),
        f"; plus {len(extra)} input file(s) the snapshot does not include" if extra else "",
    )
    return totals, frozenset(extra)


def files_counts(sc: SparkContext, config: AppConfig, names: list[str]) -> RDD[tuple[str, Any]]:
    """The job's (key, count or sum) pairs of the named files of `input_dir`, reduced per key."""
    assert config.input_dir is not None
    lines = sc.union([sc.textFile(hadoop_literal(join(config.input_dir, n))) for n in names])
    counts: RDD[tuple[str, Any]] = values_only(pre_aggregated(lines, config), config)
    return counts


def describe_seed(seed: Seed, config: AppConfig) -> str:
    """A seed's figures for the start-up line (and where Kafka resumes)."""
    manifest = seed.manifest
    text = f"batch_time_ms={manifest.batch_time_ms} words={manifest.words} total={manifest.total}"
    if config.source == "kafka":
        text += f" starting_offsets={starting_offsets_spec(manifest, config.topics)}"
    return text
