"""The few file operations the logs need, on the local disk; HadoopFs does the same for URIs."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from typing import Protocol
from urllib.parse import urlparse


class FileSystem(Protocol):
    """What the offset and commit logs need from a filesystem (local or Hadoop)."""

    def exists(self, path: str) -> bool: ...

    def delete(self, path: str) -> None: ...

    def list_names(self, directory: str) -> list[str]: ...

    def mkdirs(self, directory: str) -> None: ...

    def read_bytes(self, path: str) -> bytes: ...

    def write_atomic(self, path: str, data: bytes) -> None: ...

    def rename(self, source: str, target: str) -> None: ...


def join(base: str, name: str) -> str:
    """`base/name` for paths and URIs alike."""
    return base.rstrip("/") + "/" + name


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def local_path(directory: str) -> str | None:
    """The local path of a directory given as a plain path or a `file:` URI (no host, or
    localhost), else None (another scheme: HDFS, S3; a `file:` URI of another host)."""
    if directory.startswith("file:"):
        parsed = urlparse(directory)
        return parsed.path or None if parsed.netloc in ("", "localhost") else None
    return None if "://" in directory or _SCHEME.match(directory) else directory


def temp_path(path: str) -> str:
    """A hidden, unique sibling to write a file to before it is renamed into place.

    Unique, because on HDFS a writer killed mid-write keeps its lease on the file name
    for about a minute, and a restart must not wait for it.
    """
    head, _, name = path.rpartition("/")
    temp = f".{name}.{uuid.uuid4().hex[:12]}.tmp"
    return f"{head}/{temp}" if head else temp


class LocalFs:
    """FileSystem on local paths: used without a JVM (tests, `checkpoint inspect`)."""

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists."""
        return os.path.exists(path)

    def delete(self, path: str) -> None:
        """Delete a file or a directory tree; a missing path is not an error."""
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def list_names(self, directory: str) -> list[str]:
        """Names of the entries of a directory; empty if it does not exist."""
        try:
            return os.listdir(directory)
        except FileNotFoundError:
            return []

    def mkdirs(self, directory: str) -> None:
        """Create a directory and its parents."""
        os.makedirs(directory, exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        """Rename `source` to `target`, which must not exist."""
        if os.path.exists(target):
            raise OSError(f"could not rename {source} to {target}: it exists")
        os.rename(source, target)

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file."""
        with open(path, "rb") as handle:
            return handle.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write a file so that readers see all of it or none: temp file, fsync, rename."""
        write_local_atomic(path, data)


def write_local_atomic(
    path: str, data: bytes, mode: int | None = None, parents: bool = False
) -> None:
    """Write a local file so that readers see all of it or none: temp file, fsync, rename.

    A checksum Hadoop's local file system kept for an earlier file of that name
    (`.NAME.crc`) is removed first: Hadoop would find the new content did not match it.
    The temp file is named as temp_path names it (HadoopFs's too), which `checkpoint
    clean` knows. `mode`: the file's permissions (else 0600); `parents`: make the
    directory first if it is missing, as Hadoop's `create` does.
    """
    directory = os.path.dirname(path) or "."
    if parents:
        os.makedirs(directory, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(directory, f".{os.path.basename(path)}.crc"))
    temp = temp_path(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp)
        raise
    sync_directory(directory)  # the rename itself must survive a power cut too


def sync_directory(directory: str) -> None:
    """Make the renames in `directory` durable: a crash of the machine keeps them."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_local_path(path: str) -> bool:
    """True for a plain filesystem path, False for a URI such as hdfs:// or s3a://."""
    return "://" not in path and not path.startswith("file:")
