"""Spark's DStream checkpoint files by name: `checkpoint-<ms>` and its `.bk` copy.

Spark's JVM writes one for every batch it plans (its CheckpointWriter); the app reads only
their names: which batch times the checkpoint holds (the Kafka offset log's prune horizon,
the recovery guard, the checkpoint watch, the checkpoint tools). Here, below every stage,
and not in recovery/: the Kafka offset log (sources/, a layer below recovery/) reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CHECKPOINT_FILE = re.compile(r"^checkpoint-(\d+)(?:\.bk)?$")


def checkpoint_file_times(names: Iterable[str]) -> list[int]:
    """Batch times of Spark's `checkpoint-<ms>` files (and their `.bk` copies) among names."""
    return [int(m.group(1)) for n in names if (m := CHECKPOINT_FILE.match(n))]
