"""`checkpoint clean` of a Structured Streaming checkpoint: only what crashes left behind.

Spark keeps such a checkpoint bounded itself: the `offsets/`, `commits/` and `sources/`
logs keep the last `spark.sql.streaming.minBatchesToRetain` micro-batches (100 by
default), and the state store's maintenance deletes the state files that no kept
micro-batch needs. A restart may need any of what is left, so none of it goes. What goes:
the temp files of writes a crash cut short (Spark writes `.<name>.<uuid>.tmp` and renames
it), older than MIN_TEMP_AGE_MS, and Hadoop checksums whose file is gone, anywhere in
the checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from streaming_app.common.fs import join
from streaming_app.recovery.spark_checkpoint import CheckpointFs
from streaming_app.tools.checkpoint_clean import CleanPlan, plan_temps
from streaming_app.tools.checkpoint_inspect import ensure_checkpoint_dir

SPARK_KEEPS = (
    "offsets/, commits/ and sources/ logs and state/ files: Spark keeps them bounded "
    "itself (spark.sql.streaming.minBatchesToRetain, 100 micro-batches by default, and the "
    "state store's maintenance); a restart may need any of them"
)


def plan_clean_structured(
    fs: CheckpointFs, checkpoint_dir: str, now_ms: int | None = None
) -> CleanPlan:
    """What can go from a Structured Streaming checkpoint; removes nothing."""
    ensure_checkpoint_dir(fs, checkpoint_dir)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    plan = CleanPlan(checkpoint_dir)
    plan.kept.append(SPARK_KEEPS)
    for directory in _directories(fs, checkpoint_dir):
        plan_temps(fs, directory, now, plan)
    return plan


def _directories(fs: CheckpointFs, directory: str) -> Iterator[str]:
    """The directory and every directory below it."""
    yield directory
    for name in fs.list_names(directory):
        path = join(directory, name)
        if fs.is_dir(path):
            yield from _directories(fs, path)
