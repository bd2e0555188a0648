"""HadoopFs against the real JVM's Hadoop FileSystem: a directory's names in one round trip
are the names Hadoop gives each entry, whatever ASCII characters they hold (a comma: asked
one by one; how the JVM decodes other names is the locale's, test_files_moved_in.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming_app.common.hadoop_fs import HadoopFs

NAMES = [
    "delta-1795977768000", "totals-1795977770000", "_SUCCESS", "with space", "per%25cent",
    "hash#tag", "question?", "braces{}", "semi;colon", "trailing.", "x" * 200,
]  # fmt: skip


@pytest.fixture(scope="module")
def gateway() -> Iterator[None]:
    """PySpark's JVM gateway for these tests; one that they launched is ended after them,
    its JVM with it (a gateway another test of the process made is left to it)."""
    from pyspark import SparkContext

    before = SparkContext._gateway
    yield
    launched = SparkContext._gateway
    if before is None and launched is not None:
        launched.shutdown()
        launched.proc.kill()
        assert launched.proc.wait(timeout=30) is not None
        SparkContext._gateway = SparkContext._jvm = None


@pytest.mark.usefixtures("gateway")
@pytest.mark.parametrize("comma", [False, True])
def test_list_names_gives_hadoops_own_names_of_every_entry(tmp_path: Path, comma: bool) -> None:
    names = [*NAMES, "a,b"] if comma else NAMES
    for name in names:
        (tmp_path / name).mkdir() if name[0] in "dt" else (tmp_path / name).write_text("x")
    fs = HadoopFs.from_gateway(str(tmp_path))
    listed = fs.list_names(str(tmp_path))
    # What Hadoop says each entry is called, asked one entry at a time.
    one_by_one = [
        str(status.getPath().getName()) for status in fs._fs.listStatus(fs._path(str(tmp_path)))
    ]
    assert sorted(listed) == sorted(one_by_one) == sorted(names)
    assert fs.list_names(str(tmp_path / "delta-1795977768000")) == []  # an empty directory
    assert fs.list_names(str(tmp_path / "missing")) == []


@pytest.mark.usefixtures("gateway")
def test_a_local_write_is_pythons_and_hadoop_reads_it_over_its_own_checksum(
    tmp_path: Path,
) -> None:
    """On the local file system write_atomic and mkdirs are Python's (Hadoop's forked
    `chmod` twice a file), and Hadoop reads what they wrote: the checksum file Hadoop kept
    for the file replaced is gone, where Hadoop would refuse the new content against it."""
    fs = HadoopFs.from_gateway(str(tmp_path))
    target = tmp_path / "logs" / "commit-1"
    # Hadoop's own write first: it leaves a checksum file beside the data.
    out = fs._fs.create(fs._path(f"file:{target}"), True)
    out.write(bytearray(b"written by Hadoop"))
    out.close()
    checksum = tmp_path / "logs" / ".commit-1.crc"
    assert checksum.exists()
    fs.write_atomic(f"file://{target}", b"written again")
    assert fs.read_bytes(str(target)) == b"written again"  # through Hadoop's checksummed read
    assert not checksum.exists()  # Python's write: no checksum of its own either
    fs.mkdirs(str(tmp_path / "a" / "b"))
    assert (tmp_path / "a" / "b").is_dir()
    # local_path names what Hadoop names, without asking the JVM.
    for path in (str(tmp_path / "with space"), f"file://{tmp_path}/per%25cent", "relative/x"):
        hadoop = str(fs._fs.makeQualified(fs._path(path)).toUri().getPath())
        assert fs.local_path(path) == hadoop.rstrip("/")
