"""The structured engine's sinks: one foreachBatch function, idempotent per batch id.

Driver side: Spark calls `BatchSinks` once per micro-batch with the totals it changed (the
aggregation's output in update mode) and its batch id; the driver plans and commits, the
executors move the rows. What a micro-batch writes is decided from the offsets log before
it runs (`Due`; its time is its timestamp there, the same on a replay), and it runs once
(changes.py): inside the pass's job where only the pass reads its changed totals (a
delta micro-batch of the files and console sinks), else into the executors' blocks
(`localCheckpoint`) that every reader reads. Then each configured sink writes: the
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
accumulator (problems.py), once the micro-batch has run.
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
from streaming_app.structured.changes import Changes, needs_copy
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

    from streaming_app.common.hadoop_fs import HadoopFs
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


@dataclass(frozen=True)
class Due:
    """What one micro-batch writes, decided from the offsets log before it runs."""

    batch_id: int
    batch_ms: int
    before: int  # the micro-batch before's time (the files chain's link)
    context: str  # the query id, where a sink names its output by it
    files: FilesSettings | None
    base: bool  # a files base due (a broken chain makes one all the same)
    snapshot: bool


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
        started = time.monotonic()
        with app_errors_in_one_line(batch.sparkSession.sparkContext):  # a setting or table to fix
            self._write(batch, batch_id, started)

    def _write(self, batch: DataFrame, batch_id: int, started: float) -> None:
        from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

        checkpoint = HadoopFs(batch.sparkSession.sparkContext, self.config.checkpoint_dir)
        due = self._plan(checkpoint, batch_id)
        # The micro-batch runs once, whatever the sinks read of it: inside the pass where
        # nothing else reads its changed totals, else into the executors' blocks first.
        changes = Changes(batch, needs_copy(self.config.sinks, due.base, due.snapshot))
        every = EveryTotal(
            batch.sparkSession, self.config.checkpoint_dir, batch_id, changes.checkpointed
        )
        try:
            self._sinks(changes, due, every, checkpoint, started)
        finally:
            every.release()

    def _plan(self, checkpoint: HadoopFs, batch_id: int) -> Due:
        """What micro-batch `batch_id` writes, from the offsets log in `checkpoint` (before
        it runs)."""
        config = self.config
        batch_ms = batch_timestamp(checkpoint, config.checkpoint_dir, batch_id)
        if batch_ms is None:
            raise CheckpointError(f"micro-batch {batch_id} has no entry in the offsets log")
        previous = batch_timestamp(checkpoint, config.checkpoint_dir, batch_id - 1)
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
        return Due(batch_id, batch_ms, before, context, files, base, snapshot)

    def _sinks(
        self, changes: Changes, due: Due, every: EveryTotal, checkpoint: HadoopFs, started: float
    ) -> None:
        from streaming_app.common.hadoop_fs import HadoopFs  # needs the JVM: driver side only

        config = self.config
        spark = changes.batch.sparkSession
        sc = spark.sparkContext
        # The count, the console's top N and a files delta: one job (changes_pass.py).
        passed = ChangesPass(changes, config.top_n if "console" in config.sinks else 0)
        written = []
        for sink in config.sinks:
            if sink == "files":
                assert due.files is not None
                out = due.files.output_dir
                fs = HadoopFs(sc, out)
                chain = chain_reader(fs, out, due.context, due.before, spark, changes.checkpointed)
                write_base = base_writer(chain, every, due.snapshot)
                write_delta = partial(passed.write_delta, fs)
                kind = write_files(
                    fs, due.files, due.batch_ms, due.before, write_delta, write_base, due.base
                )
                written.append(f"files: {kind}")
            elif sink == "postgres":
                entry = offsets_entry(checkpoint, config.checkpoint_dir, due.batch_id)
                offset = entry.sources[0] if entry is not None and entry.sources else None
                rows = text_pairs(changes.checkpointed())
                done = write_postgres(
                    config, due.context, due.batch_id, due.batch_ms, rows, offset, every.text_pairs
                )
                written.append(f"postgres: {done}")
        found = passed.result()
        # After the micro-batch ran: the accumulator holds what its tasks found.
        self._warn(due.batch_id, due.batch_ms)
        if "console" in config.sinks:
            print_line(datetime.fromtimestamp(due.batch_ms / 1000), found.top)
        if due.snapshot:
            write_snapshot(spark, config, due.batch_id, due.batch_ms, every.frame)
        log.info(
            "batch_id=%d batch_time_ms=%d: %d totals changed%s in %.0f ms",
            due.batch_id,
            due.batch_ms,
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
