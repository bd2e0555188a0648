"""The structured engine's sinks: one foreachBatch function, idempotent per batch id.

Driver side: Spark calls `BatchSinks` once per micro-batch with the totals it changed (the
aggregation's output in update mode) and its batch id; the driver plans and commits, the
executors move the rows. The micro-batch runs once: its changed totals are checkpointed
where they are (`localCheckpoint`, the executors' blocks), so that every sink and every
total read them without running the micro-batch again; the micro-batch's time is its
timestamp in the offsets log, the same on a replay. Then each configured sink writes: the
files sink a delta or a base, as part files written by the executors (files_sink.py,
files_base.py), the postgres sink the changed totals, or every total after a gap, staged by
the executors and merged with the micro-batch's progress row in one transaction
(postgres_sink.py), the console the DStream engine's line over the totals this micro-batch
changed, its top N ranked on the executors; one job (changes_pass.py) counts the changed
totals, ranks the top N and writes a local delta; then the snapshot, when one is due
(snapshot_writer.py). Every total, which a base, a snapshot and the postgres sink after a
gap need, is read once a micro-batch (totals.py `EveryTotal`). The driver receives a count
and the top N, never the micro-batch's rows. A recovered query's first micro-batch leaves a
base and a snapshot that fell due while the app was down to the micro-batch after it
(`Deferred`): its output goes out sooner. Each sink skips on its own what it wrote before a
restart. What the sources skipped or repaired is warned of from the query's problem
accumulator (problems.py).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming_app.common.output_errors import app_errors_in_one_line
from streaming_app.common.prometheus import count_bad_values
from streaming_app.errors import CheckpointError
from streaming_app.sinks.console import print_line
from streaming_app.sinks.files import FilesSettings, base_due
from streaming_app.structured import problems
from streaming_app.structured.changes_pass import ChangesPass
from streaming_app.structured.files_base import base_writer, chain_reader
from streaming_app.structured.files_sink import write_files
from streaming_app.structured.postgres_sink import write_postgres
from streaming_app.structured.query_log import batch_timestamp, offsets_entry, query_id
from streaming_app.structured.snapshot_writer import snapshot_due, write_snapshot
from streaming_app.structured.state_layout import value_type
from streaming_app.structured.totals import EveryTotal, text_pairs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)


@dataclass
class Deferred:
    """A base and a snapshot due in a recovered query's first micro-batch, left to the next.

    After a restart, the first micro-batch reads what came in while the app was down; a
    base and a snapshot are due in it whenever the pause spanned their interval, and in
    a new JVM they cost more than the micro-batch itself. Its output goes out first; the
    micro-batch after it writes them (a delta in between, linked as ever). Which
    micro-batch writes them does not matter to a replay: each is of the micro-batch that
    writes it, and a sink skips what it wrote before.
    """

    started: bool = False
    base: bool = False
    snapshot: bool = False

    def decide(self, batch_id: int, base: bool, snapshot: bool) -> tuple[bool, bool]:
        """(base, snapshot) to write in micro-batch `batch_id`, given which are due."""
        first, self.started = not self.started, True
        if first and batch_id > 0 and (base or snapshot):  # micro-batch 0 starts the chain
            self.base, self.snapshot = base, snapshot
            return False, False
        base, snapshot = base or self.base, snapshot or self.snapshot
        self.base = self.snapshot = False
        return base, snapshot


@dataclass
class BatchSinks:
    """The foreachBatch function: every configured sink writes each micro-batch.

    accumulator: the query's problem counts (problems.ProblemCounts), None in tests."""

    config: AppConfig
    accumulator: Any = None
    _context_id: str | None = field(default=None, init=False)
    _problems: Counter[str] = field(default_factory=Counter, init=False)  # since start
    _deferred: Deferred = field(default_factory=Deferred, init=False)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Write micro-batch `batch_id` (its changed totals) to every sink, then its
        snapshot if one is due."""
        spark = batch.sparkSession
        started = time.monotonic()
        every: EveryTotal | None = None
        try:
            with app_errors_in_one_line(spark.sparkContext):  # a setting or table to fix
                # The micro-batch runs here, once, whatever the sinks read of it. Its
                # blocks go when the frame does: Spark's ContextCleaner removes a
                # checkpointed RDD's blocks once the driver JVM has collected it.
                changes = batch.localCheckpoint(eager=True)
                every = EveryTotal(spark, self.config.checkpoint_dir, batch_id, changes)
                self._write(changes, batch_id, every, started)
        finally:
            if every is not None:
                every.release()

    def _write(self, changes: DataFrame, batch_id: int, every: EveryTotal, started: float) -> None:
        from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

        config = self.config
        spark = changes.sparkSession
        sc = spark.sparkContext
        checkpoint = HadoopFs(sc, config.checkpoint_dir)
        batch_ms = batch_timestamp(checkpoint, config.checkpoint_dir, batch_id)
        if batch_ms is None:
            raise CheckpointError(f"micro-batch {batch_id} has no entry in the offsets log")
        previous = batch_timestamp(checkpoint, config.checkpoint_dir, batch_id - 1)
        self._warn(batch_id, batch_ms)
        if self._context_id is None and {"files", "postgres"} & set(config.sinks):
            self._context_id = query_id(checkpoint, config.checkpoint_dir)
        context = self._context_id or ""
        files = FilesSettings.from_config(config, context) if "files" in config.sinks else None
        # Without the entry before (micro-batch 0), the chain starts with a base.
        before = batch_ms - config.batch_ms if previous is None else previous
        # Known first: a files base due in the same micro-batch shares the snapshot's read.
        base, snapshot = self._deferred.decide(
            batch_id,
            files is not None and base_due(files, batch_ms, before),
            snapshot_due(config, batch_ms, previous),
        )
        if self._deferred.base or self._deferred.snapshot:
            log.info(
                "batch_id=%d batch_time_ms=%d: the first micro-batch after the restart; "
                "the base and snapshot due now follow with the next one",
                batch_id,
                batch_ms,
            )

        # The count, the console's top N and a files delta: one job (changes_pass.py).
        passed = ChangesPass(changes, config.top_n if "console" in config.sinks else 0)
        written = []
        for sink in config.sinks:
            if sink == "files":
                assert files is not None
                fs = HadoopFs(sc, files.output_dir)
                chain = chain_reader(fs, files.output_dir, context, before, spark, changes)
                write_base = base_writer(chain, every, snapshot)
                write_delta = partial(passed.write_delta, fs)
                kind = write_files(fs, files, batch_ms, before, write_delta, write_base, base)
                written.append(f"files: {kind}")
            elif sink == "postgres":
                entry = offsets_entry(checkpoint, config.checkpoint_dir, batch_id)
                offset = entry.sources[0] if entry is not None and entry.sources else None
                rows = text_pairs(changes)
                done = write_postgres(
                    config, context, batch_id, batch_ms, rows, offset, every.text_pairs
                )
                written.append(f"postgres: {done}")
        found = passed.result()
        if "console" in config.sinks:
            print_line(datetime.fromtimestamp(batch_ms / 1000), found.top)
        if snapshot:
            write_snapshot(spark, config, batch_id, batch_ms, every.frame)
        log.info(
            "batch_id=%d batch_time_ms=%d: %d totals changed%s in %.0f ms",
            batch_id,
            batch_ms,
            found.changed,
            "".join(f", {what}" for what in written),
            (time.monotonic() - started) * 1000,
        )

    def _warn(self, batch_id: int, batch_ms: int) -> None:
        """The micro-batch's Kafka values skipped or repaired and bad CSV rows, if any; the
        words it counted and its bad values by reason for the metrics."""
        if self.accumulator is None:
            return
        now = Counter(self.accumulator.value)
        found = problems.since(now, self._problems)
        self._problems = now
        if self.config.job != "keyed-sum":
            problems.note_words(batch_id, found)
        count_bad_values(problems.by_reason(found))
        if not found:
            return
        config = self.config
        for line in problems.warnings(
            found,
            now,
            config.value_field or "value",
            config.key_field or "key",
            value_type(config.job, config.sum_scale),
        ):
            log.warning("batch_id=%d batch_time_ms=%d: %s", batch_id, batch_ms, line)
