"""The files source's position: which input files each batch read, logged under the checkpoint.

`input-files/<batch_ms>` lists the names of the files a batch of the directory source
read (names only: the source watches one flat directory). A snapshot folds these into
its manifest, so that a context restored from it knows which files its totals include.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from streaming_app.common.batch_log import BatchLog
from streaming_app.common.fs import FileSystem, join

if TYPE_CHECKING:
    pass

INPUT_FILES_DIR = "input-files"
# The note of a new context's first entry: the files already there, which it does not read.
PRESENT_AT_START = "present-at-start"


class InputFilesLog(BatchLog):
    """`input-files/<batch_ms>`: the input files each batch read."""

    def __init__(self, fs: FileSystem, checkpoint_dir: str) -> None:
        super().__init__(fs, join(checkpoint_dir, INPUT_FILES_DIR))

    def write_files(self, batch_ms: int, names: Iterable[str], note: str = "read") -> None:
        """Log the files of a batch (`note`: read, or present-at-start, or seeded)."""
        self.write(batch_ms, {"files": sorted(set(names)), "note": note})

    def files_between(self, after_ms: int | None, until_ms: int) -> set[str]:
        """Every file logged for batches in (after_ms, until_ms]."""
        names: set[str] = set()
        for batch_ms in self.batch_times():
            if (after_ms is None or batch_ms > after_ms) and batch_ms <= until_ms:
                record = self.read(batch_ms) or {}
                names.update(str(n) for n in record.get("files", []))
        return names


def base_name(path: str) -> str:
    """The last component of a path or URI."""
    return path.rstrip("/").rpartition("/")[2]


def visible_names(names: Iterable[str]) -> list[str]:
    """Names the files source reads: FileInputDStream's default filter hides dot-files."""
    return [n for n in names if not n.startswith(".")]
