"""The file system of a path: the local disk's, or Hadoop's (through the JVM) for a URI."""

from __future__ import annotations

from streaming_app.common.fs import FileSystem, LocalFs, is_local_path


def filesystem_for(path: str) -> FileSystem:
    """LocalFs for a local path; Hadoop's FileSystem (through the JVM) for a URI."""
    if is_local_path(path):
        return LocalFs()
    from streaming_app.common.hadoop_fs import HadoopFs

    return HadoopFs.from_gateway(path)
