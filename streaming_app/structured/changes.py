"""A micro-batch's changed totals: run once inside the pass, or checkpointed for many readers.

Driver side. The frame foreachBatch gets is the micro-batch's plan: reading it runs the
micro-batch (its input, its state operator), and a plan that reads it twice runs it twice.
Most micro-batches read it once, in the changes pass (changes_pass.py: the count, the
console's top N and the files delta in one job): `once` hands that pass the frame itself,
so the micro-batch, the pass and the delta's part files are one Spark job, with no copy of
the changed totals kept between them. A micro-batch that reads them more than once (a
files base or a snapshot, which lay them over every total; the postgres sink; a delta
written by Spark's writer beside the pass) takes `checkpointed`: the micro-batch runs once
into the executors' blocks (`localCheckpoint`), and every reader, the pass included, reads
those. Which one a micro-batch needs is known before it runs (`needs_copy`), or found on
the way (a broken files chain writes a base; a delta on HDFS): asking for the copy before
the pass is always right; asking after the pass read the frame itself is a bug, refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def needs_copy(sinks: tuple[str, ...], base: bool, snapshot: bool) -> bool:
    """Whether a micro-batch's changed totals are read by more than the pass, known before it
    runs: a base or a snapshot is due, or the postgres sink writes them."""
    return base or snapshot or "postgres" in sinks


class Changes:
    """The changed totals of one micro-batch, read once (`once`) or from a copy (`checkpointed`)."""

    def __init__(self, batch: DataFrame, copy: bool) -> None:
        self.batch = batch
        self._copy: DataFrame | None = None
        self._read = False
        if copy:
            self.checkpointed()

    def checkpointed(self) -> DataFrame:
        """The changed totals in the executors' blocks: the micro-batch runs now if it has
        not yet; every later read reads the blocks."""
        if self._copy is None:
            if self._read:
                raise RuntimeError(
                    "the micro-batch's changed totals were read once already: a second "
                    "reader must ask for the copy before the first read"
                )
            # Its blocks go when the frame does: Spark's ContextCleaner removes a
            # checkpointed RDD's blocks once the driver JVM has collected it.
            self._copy = self.batch.localCheckpoint(eager=True)
        return self._copy

    def once(self) -> DataFrame:
        """The changed totals for their last reader: the copy if there is one, else the
        micro-batch's own frame (the micro-batch runs in the reader's job)."""
        if self._copy is not None:
            return self._copy
        self._read = True
        return self.batch

    @property
    def copied(self) -> bool:
        """Whether the changed totals are in the executors' blocks."""
        return self._copy is not None
