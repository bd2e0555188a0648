"""Starting the stream: the guard, getOrCreate, and falling back past unusable checkpoint files."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from streaming_app.common.checkpoint_files import CHECKPOINT_FILE
from streaming_app.common.failure_text import failure_text, java_summary
from streaming_app.common.fs import FileSystem, join
from streaming_app.common.path_fs import filesystem_for
from streaming_app.common.prometheus import replaying
from streaming_app.common.spark_env import under_spark_submit
from streaming_app.errors import CheckpointError, StreamingAppError, StreamingFailedError
from streaming_app.lifecycle.spark_context import changed_settings, conf_pairs
from streaming_app.lifecycle.spark_secret import warn_secret_in_checkpoint
from streaming_app.recovery.guard import RESTORE, StartPlan, incompatible, plan_start, reseed
from streaming_app.recovery.restore import Seed
from streaming_app.recovery.spark_checkpoint import unusable_name
from streaming_app.settings.schema import AppConfig
from streaming_app.sources.kafka.offsets import cap_for

log = logging.getLogger(__name__)

# Storage that did not answer: the checkpoint may be fine, and a restart may read it.
TRANSIENT = re.compile(
    r"ConnectException|SocketTimeoutException|UnknownHostException|NoRouteToHostException"
    r"|Connection refused|RetriableException|SafeModeException|StandbyException|timed out"
)
# Spark keeps ten checkpoint files; each attempt sets aside at least one of them.
MAX_FALLBACKS = 10


class UnusableCheckpointError(Exception):
    """The checkpoint file Spark read names state checkpoint files that are gone."""


def get_or_create(config: AppConfig, seed: Seed | None = None) -> tuple[Any, bool]:
    """StreamingContext.getOrCreate with our factory; returns (context, created_new)."""
    from pyspark.streaming import StreamingContext

    from streaming_app.dstream.factory import create_context, dstream_spark_context

    created = []

    def factory() -> StreamingContext:
        created.append(True)
        return create_context(config, seed)

    try:
        # Today's settings, before Spark reads the checkpoint: a recovered context takes
        # this SparkContext instead of the settings stored in the checkpoint.
        dstream_spark_context(config)
        ssc = StreamingContext.getOrCreate(config.checkpoint_dir, factory)
    except StreamingAppError:
        raise
    except Exception as exc:
        summary = java_summary(exc)
        text = failure_text(exc)
        if not created and state_files_missing(text):
            raise UnusableCheckpointError(summary) from None
        if created or "Failed to read checkpoint" not in text or TRANSIENT.search(text):
            # Not the checkpoint's fault (Java missing, a bad master, HDFS down): a
            # restart may well succeed, so this is a crash, not exit 3.
            raise StreamingFailedError(
                f"could not start the streaming context: {summary}"
            ) from None
        raise CheckpointError(
            f"cannot recover from checkpoint {config.checkpoint_dir}: {summary}. "
            "It was probably written by another version of streaming_app, Spark or Python. "
            f"Restart with --on-incompatible-checkpoint {RESTORE} to carry the totals over "
            "from the newest snapshot. Move the directory aside to start afresh (totals "
            "restart from zero); see docs/recovery.md"
        ) from None
    return ssc, bool(created)


def start_context(config: AppConfig, plan: StartPlan | None = None) -> tuple[Any, bool]:
    """Check the checkpoint (the guard), then get or create the context accordingly."""
    from streaming_app.recovery.metadata import CheckpointMetadata

    fs = filesystem_for(config.checkpoint_dir)
    if plan is None:
        plan = plan_start(fs, config, CheckpointMetadata.for_config(config))
    try:
        return get_or_create(config, mark_seeding(fs, config, plan))
    except CheckpointError as error:
        if not plan.recover or config.on_incompatible_checkpoint != RESTORE:
            raise
        # Every checkpoint file failed to load in Spark: the policy applies as well.
        plan = incompatible(fs, config, None, [str(error).split(". ")[0]])
        return get_or_create(config, mark_seeding(fs, config, plan))


def mark_seeding(fs: FileSystem, config: AppConfig, plan: StartPlan) -> Seed | None:
    """Record a planned seed in the checkpoint directory before Spark starts; return it.

    Starting Spark takes seconds; a driver killed meanwhile must seed again on restart,
    not start from empty totals (the factory rewrites the record when it runs).
    """
    from streaming_app.recovery.metadata import CheckpointMetadata, write_metadata

    if plan.seed is not None:
        pending = CheckpointMetadata.for_config(
            config, seeded_from=plan.seed.path, seeded_batch_ms=plan.seed.manifest.batch_time_ms
        )
        write_metadata(fs, config.checkpoint_dir, pending)
    return plan.seed


def start_streaming(config: AppConfig, listener: Callable[[int | None], Any]) -> Any:
    """Get or create the context and start it; returns the running context.

    `listener` makes the StreamingListener; a recovered context passes it the time up to
    which its first batches replay the missed intervals (None for a new context).

    Spark falls back to an older checkpoint file when the newest cannot be read, but
    an older file may name state checkpoint files that Spark has since deleted, and
    start() then fails. Such files are set aside (renamed `unusable-ckpt-<ms>`)
    and the next older one is tried, so one damaged file does not stop the app.
    """
    plan: StartPlan | None = None
    fs = filesystem_for(config.checkpoint_dir)
    for _ in range(MAX_FALLBACKS):
        try:
            ssc, created = start_context(config, plan)
        except UnusableCheckpointError as exc:
            plan = set_aside_from(fs, config, None, str(exc))
            continue
        recovered_ms = None if created else log_recovery(ssc, config)
        if created:
            log.info("Started new streaming context; checkpoints in %s", config.checkpoint_dir)
        if under_spark_submit() and ssc.sparkContext.master != config.master:
            log.info("master %s comes from spark-submit", ssc.sparkContext.master)
        # Spark queues the missed intervals at start(): up to the next interval from now.
        replay_until = None if created else int(time.time() * 1000) + config.batch_ms
        ssc.addStreamingListener(listener(replay_until))
        if replay_until is not None:
            replaying("the intervals missed since the checkpoint, a batch each")
        try:
            ssc.start()
            return ssc
        except Exception as exc:
            stop_quietly(ssc)
            text = failure_text(exc)
            if recovered_ms is not None and "lacks a SparkContext" in text:
                # A seeded context before its first state checkpoint: the initial RDD
                # does not survive the checkpoint. Seed it again from the same snapshot.
                plan = reseed_unrecoverable(fs, config, java_summary(exc))
                continue
            if recovered_ms is None or not state_files_missing(text):
                raise
            plan = set_aside_from(fs, config, recovered_ms, java_summary(exc))
    raise CheckpointError(
        f"no checkpoint file in {config.checkpoint_dir} could be recovered; restart with "
        f"--on-incompatible-checkpoint {RESTORE} to carry the totals over from the newest "
        "snapshot, or move the directory aside to start afresh"
    )


def reseed_unrecoverable(fs: FileSystem, config: AppConfig, why: str) -> StartPlan:
    """The plan for a seeded checkpoint that Spark cannot recover: seed it again."""
    from streaming_app.recovery.metadata import read_metadata

    recorded = read_metadata(fs, config.checkpoint_dir)
    if recorded is None or not recorded.seeded_from:
        raise CheckpointError(f"cannot recover checkpoint {config.checkpoint_dir}: {why}")
    log.warning(
        "the checkpoint was seeded from %s and Spark cannot recover it before its first "
        "state checkpoint (%s); starting again from that snapshot",
        recorded.seeded_from,
        why,
    )
    return reseed(fs, config.checkpoint_dir, recorded.seeded_from)


def state_files_missing(text: str) -> bool:
    """Whether a start failed because the state checkpoint files a checkpoint names are gone."""
    return "Checkpoint directory does not exist" in text and "/rdd-" in text


def set_aside_from(
    fs: FileSystem, config: AppConfig, from_ms: int | None, why: str
) -> StartPlan | None:
    """Rename the checkpoint files of `from_ms` (default: the newest) and newer ones.

    Spark then recovers from an older checkpoint file.
    With none older left, on_incompatible_checkpoint decides: fail, or the plan of a
    context seeded from the newest snapshot.
    """
    ckpt = config.checkpoint_dir
    names = fs.list_names(ckpt)
    files = [(int(m.group(1)), n) for n in names if (m := CHECKPOINT_FILE.match(n))]
    if from_ms is None:
        from_ms = max((t for t, _ in files), default=0)
    doomed = [n for t, n in files if t >= from_ms]
    if not any(t < from_ms for t, _ in files):
        error = CheckpointError(
            f"checkpoint {ckpt}: no usable checkpoint file is left (the newest readable one, "
            f"batch_time_ms={from_ms}, names state files that are gone: {why})"
        )
        if config.on_incompatible_checkpoint != RESTORE:
            raise CheckpointError(
                f"{error}. Restart with --on-incompatible-checkpoint {RESTORE} to carry the "
                "totals over from the newest snapshot, or move the directory aside"
            )
        return incompatible(fs, config, None, [str(error)])
    log.warning(
        "checkpoint batch_time_ms=%d names state files that are gone (%s); setting aside %s "
        "and recovering from an older checkpoint file",
        from_ms,
        why,
        ", ".join(sorted(doomed)),
    )
    for name in doomed:
        fs.rename(join(ckpt, name), join(ckpt, unusable_name(name)))
    return None


def log_recovery(ssc: Any, config: AppConfig) -> int | None:
    """Say which checkpoint was recovered and how much down time will be replayed.

    Returns the recovered checkpoint's batch time in epoch ms (None if Spark hides it).
    """
    try:
        checkpoint = ssc._jssc.ssc().initialCheckpoint()
        checkpoint_ms = int(checkpoint.checkpointTime().milliseconds())
        batch_ms = int(checkpoint.graph().batchDuration().milliseconds())
        recorded = conf_pairs(checkpoint.sparkConfPairs())
    except Exception:
        log.info("Recovered streaming context from checkpoint %s", config.checkpoint_dir)
        return None
    stamp = datetime.fromtimestamp(checkpoint_ms / 1000, tz=timezone.utc)
    missed = max(0, (int(time.time() * 1000) - checkpoint_ms) // batch_ms)
    log.info(
        "Recovered streaming context from checkpoint %s at batch_time_ms=%d (%s UTC); "
        "about %d missed batch intervals will be replayed, one batch each",
        config.checkpoint_dir,
        checkpoint_ms,
        stamp.strftime("%Y-%m-%d %H:%M:%S"),
        missed,
    )
    log_settings(ssc, config, recorded)
    if config.source == "kafka" and missed > 1:
        if config.max_rate_per_partition:
            log.info(
                "each replayed batch reads at most %d records per partition "
                "(max_rate_per_partition=%d/s)",
                cap_for(config.max_rate_per_partition, batch_ms),
                config.max_rate_per_partition,
            )
        else:
            log.warning(
                "max_rate_per_partition is 0 (no cap): the first replayed batch reads the "
                "whole backlog at once; set a cap to keep each replayed batch bounded"
            )
    return checkpoint_ms


def log_settings(ssc: Any, config: AppConfig, recorded: dict[str, str]) -> None:
    """Say which Spark settings differ from the checkpoint's (today's apply), and whether
    the checkpoint holds the cluster's secret."""
    warn_secret_in_checkpoint(recorded, config.checkpoint_dir)
    today = dict(ssc.sparkContext.getConf().getAll())
    changed = changed_settings(recorded, today)
    if changed:
        log.info(
            "Spark settings that differ from the checkpoint's, applied as given today: %s",
            ", ".join(changed),
        )


def stop_quietly(ssc: Any) -> None:
    """Stop a context that failed, and its SparkContext, ignoring further errors."""
    try:
        ssc.stop(stopSparkContext=True, stopGraceFully=False)
    except Exception:
        log.debug("error while stopping after a failure", exc_info=True)
