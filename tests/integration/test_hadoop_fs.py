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
