"""Driver-side file operations through Spark's Hadoop FileSystem, so paths may be HDFS/S3 URIs.

On Hadoop's local file system (a path, or `file:`) a small file is written and a directory
made by Python instead (fs.write_local_atomic): Hadoop's local file system sets each new file's
permissions by running `chmod`, a process of its own for the file and another for its
checksum file, which made each write 10-16 ms on the driver, three of them a batch.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

from pyspark import SparkContext

from streaming_app.common.fs import local_path as plain_local_path
from streaming_app.common.fs import temp_path, write_local_atomic

# What Hadoop's local file system makes a new file with its default umask (022).
LOCAL_FILE_MODE = 0o644

# JVM classes by name, with the gateway's JVM view they were resolved on (kept, so that
# a new one is never mistaken for it). py4j asks the JVM about every segment of a dotted
# name (five round trips for `org.apache.hadoop.fs.Path`), and the driver makes some tens
# of paths and several file system objects a batch.
_CLASSES: dict[str, tuple[Any, Any]] = {}


def jvm_class(jvm: Any, name: str) -> Any:
    """The py4j handle of JVM class `name`, resolved once per gateway."""
    known = _CLASSES.get(name)
    if known is not None and known[0] is jvm:
        return known[1]
    found = jvm
    for segment in name.split("."):
        found = getattr(found, segment)
    _CLASSES[name] = (jvm, found)
    return found


class HadoopFs:
    """The few FileSystem calls the sinks need, on the filesystem of one base path."""

    def __init__(self, sc: SparkContext, base: str) -> None:
        self._init(sc._jvm, sc._jsc.hadoopConfiguration(), base)

    def _init(self, jvm: Any, hadoop_conf: Any, base: str) -> None:
        self._jvm = jvm
        self._path_class = jvm_class(jvm, "org.apache.hadoop.fs.Path")
        self._fs = self._path_class(base).getFileSystem(hadoop_conf)

    @cached_property
    def _is_local(self) -> bool:
        """Whether this is Hadoop's local file system (asked once, when first needed)."""
        return str(self._fs.getScheme()) == "file"

    @classmethod
    def from_gateway(cls, base: str) -> HadoopFs:
        """A HadoopFs before any SparkContext exists: Spark's default Hadoop configuration."""
        SparkContext._ensure_initialized()
        jvm: Any = SparkContext._jvm
        fs = cls.__new__(cls)
        fs._init(jvm, jvm.org.apache.spark.deploy.SparkHadoopUtil.get().conf(), base)
        return fs

    def _path(self, path: str) -> Any:
        return self._path_class(path)

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists."""
        return bool(self._fs.exists(self._path(path)))

    def delete(self, path: str) -> None:
        """Delete a file or a directory tree; a missing path is not an error."""
        self._fs.delete(self._path(path), True)

    def rename(self, source: str, target: str) -> None:
        """Rename `source` to `target`, which must not exist (atomic on HDFS and POSIX)."""
        if not self._fs.rename(self._path(source), self._path(target)):
            raise OSError(f"could not rename {source} to {target}")

    def publish_dir(self, temp: str, final: str) -> None:
        """Move a fully written directory into place, replacing an earlier one of that name.

        A replay writes the same content again; the renames keep the gap in which a
        reader sees no directory tiny, and a reader never sees a partial one.
        """
        if self.exists(final):
            head, _, name = final.rstrip("/").rpartition("/")
            aside = f"{head}/_replaced-{name}"
            self.delete(aside)
            self.rename(final, aside)
            self.rename(temp, final)
            self.delete(aside)
        else:
            self.rename(temp, final)

    def list_names(self, directory: str) -> list[str]:
        """Names of the entries of a directory; empty if it does not exist.

        The entries' paths come back in one string (`ArrayUtils.toString`: `{p1,p2}`), cut
        at the commas; when a name holds a comma (more parts than entries) each entry is
        asked for its name. A round trip to the JVM for each entry took 25 ms a call for the
        hundred entries of a files sink's output, every batch.
        """
        path = self._path(directory)
        if not self._fs.exists(path):
            return []
        paths = jvm_class(self._jvm, "org.apache.hadoop.fs.FileUtil").stat2Paths(
            self._fs.listStatus(path)
        )
        count = len(paths)
        if not count:
            return []
        text = str(jvm_class(self._jvm, "org.apache.commons.lang3.ArrayUtils").toString(paths))
        names = [entry.rpartition("/")[2] for entry in text[1:-1].split(",")]
        if len(names) != count:
            names = [str(entry.getName()) for entry in paths]
        return names

    def modification_times(self, directory: str) -> dict[str, int]:
        """Each file's modification time in epoch ms (not directories); empty if none."""
        path = self._path(directory)
        if not self._fs.exists(path):
            return {}
        return {
            str(status.getPath().getName()): int(status.getModificationTime())
            for status in self._fs.listStatus(path)
            if status.isFile()
        }

    def set_modification_time(self, path: str, mtime_ms: int) -> None:
        """Set a file's modification time (its access time unchanged)."""
        self._fs.setTimes(self._path(path), mtime_ms, -1)

    def local_path(self, path: str) -> str | None:
        """The path on the local file system (absolute) if `path` is on one, else None."""
        local = plain_local_path(path) if self._is_local else None
        return os.path.abspath(local) if local is not None else None

    def mkdirs(self, directory: str) -> None:
        """Create a directory and its parents."""
        local = self.local_path(directory)
        if local is not None:
            os.makedirs(local, exist_ok=True)
            return
        self._fs.mkdirs(self._path(directory))

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file."""
        stream = self._fs.open(self._path(path))
        try:
            return bytes(jvm_class(self._jvm, "org.apache.commons.io.IOUtils").toByteArray(stream))
        finally:
            stream.close()

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write a file so that readers see all of it or none: temp file, then rename.

        The target is replaced if it exists (delete, then rename: HDFS's rename does
        not overwrite); a reader may then briefly see no file, never a partial one. On the
        local file system, Python's (fsync'd, replaced in one rename, no `chmod`), its
        directory made if missing and the file 0644, as Hadoop's would be.
        """
        local = self.local_path(path)
        if local is not None:
            write_local_atomic(local, data, mode=LOCAL_FILE_MODE, parents=True)
            return
        temp = temp_path(path)
        out = self._fs.create(self._path(temp), True)
        try:
            out.write(bytearray(data))
            out.hsync()
        finally:
            out.close()
        if self.exists(path):
            self.delete(path)
        self.rename(temp, path)
