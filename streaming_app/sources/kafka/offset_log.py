"""The offset log and commit log under the checkpoint directory: one JSON file per batch time."""

from __future__ import annotations

from collections.abc import Iterable

from streaming_app.common.batch_log import BatchLog
from streaming_app.common.checkpoint_files import checkpoint_file_times
from streaming_app.common.fs import FileSystem, join
from streaming_app.errors import CheckpointError
from streaming_app.sources.kafka.offsets import OffsetRange, ranges_from_json, ranges_to_json

OFFSETS_DIR = "offsets"
COMMITS_DIR = "commits"


class OffsetLog(BatchLog):
    """`offsets/<batch_ms>`: the ranges planned for each batch, written before it runs."""

    def __init__(self, fs: FileSystem, checkpoint_dir: str) -> None:
        super().__init__(fs, join(checkpoint_dir, OFFSETS_DIR))
        # The newest entry, once listed: one driver writes the log, in batch-time order,
        # so it is kept up to date here instead of listing the directory every batch.
        self._newest: tuple[int, list[OffsetRange]] | None = None
        self._listed = False

    def write_ranges(self, batch_ms: int, ranges: list[OffsetRange]) -> None:
        """Log the ranges of a batch (before the batch may run)."""
        self.write(batch_ms, {"ranges": ranges_to_json(ranges)})
        if self._listed and (self._newest is None or batch_ms > self._newest[0]):
            self._newest = (batch_ms, list(ranges))

    def read_ranges(self, batch_ms: int) -> list[OffsetRange] | None:
        """The logged ranges of a batch, or None if it was never planned."""
        record = self.read(batch_ms)
        if record is None:
            return None
        try:
            return ranges_from_json(record["ranges"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"log entry {self.path(batch_ms)} has no valid ranges ({exc}); move the "
                "checkpoint directory aside to start afresh"
            ) from None

    def newest(self) -> tuple[int, list[OffsetRange]] | None:
        """The newest logged batch and its ranges, or None before the first batch."""
        if not self._listed:
            times = self.batch_times()
            if times:
                ranges = self.read_ranges(times[-1])
                assert ranges is not None
                self._newest = (times[-1], ranges)
            self._listed = True
        return self._newest


class CommitLog(BatchLog):
    """`commits/<batch_ms>`: batches whose every output operation has completed."""

    def __init__(self, fs: FileSystem, checkpoint_dir: str) -> None:
        super().__init__(fs, join(checkpoint_dir, COMMITS_DIR))


def uncommitted(offsets: OffsetLog, commits: CommitLog) -> list[int]:
    """Batches planned but not (yet) committed: in flight, or to be replayed on recovery."""
    done = set(commits.batch_times())
    return [t for t in offsets.batch_times() if t not in done]


def prune_horizon(
    batch_ms: int,
    checkpoint_names: Iterable[str],
    interval_ms: int,
    checkpoint_ms: int,
    window_ms: int = 0,
) -> int | None:
    """Log entries older than this can go; None while there is no Spark checkpoint file.

    Recovery starts from one of the `checkpoint-<ms>` files in the directory (the newest
    readable one; Spark keeps the last ten) and recomputes the state from the last state
    checkpoint before it, at most one checkpoint interval earlier. So whatever is older
    than the oldest file there, minus a checkpoint interval and a margin, cannot be
    needed, even if Spark's checkpoint writer lags far behind the batches. A sliding
    window reaches a window further back: recovery recomputes the batches inside it.
    """
    times = checkpoint_file_times(checkpoint_names)
    if not times:
        return None
    by_files = min(times) - checkpoint_ms - 10 * interval_ms - window_ms
    return min(by_files, batch_ms - retention_ms(interval_ms, checkpoint_ms) - window_ms)


def retention_ms(batch_ms: int, checkpoint_ms: int) -> int:
    """How far back from the newest batch a recovery can still need log entries.

    Recovery restarts from a metadata checkpoint that may be a few batches old (Spark
    keeps the last ten files and falls back to older ones), and recomputes the state from
    the last state checkpoint before it, up to one checkpoint interval further back.
    Twice that, plus 100 batches, leaves a wide margin.
    """
    return 2 * checkpoint_ms + 100 * batch_ms
