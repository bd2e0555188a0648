"""HadoopFs against the real JVM's Hadoop FileSystem: a directory's names in one round trip
are the names Hadoop gives each entry, whatever characters they hold (a comma: asked one
by one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.common.hadoop_fs import HadoopFs
from streaming_app.common.spark_env import launching_jvm

NAMES = [
    "delta-1795977768000", "totals-1795977770000", "_SUCCESS", "with space", "per%25cent",
    "hash#tag", "caf\u00e9", "\u65e5\u672c", "question?", "braces{}", "trailing.", "x" * 200,
]  # fmt: skip


@pytest.mark.parametrize("comma", [False, True])
def test_list_names_gives_hadoops_own_names_of_every_entry(tmp_path: Path, comma: bool) -> None:
    names = [*NAMES, "a,b"] if comma else NAMES
    for name in names:
        (tmp_path / name).mkdir() if name[0] in "dt" else (tmp_path / name).write_text("x")
    with launching_jvm():  # as the app's, unless this process has a JVM already
        fs = HadoopFs.from_gateway(str(tmp_path))
    listed = fs.list_names(str(tmp_path))
    # What Hadoop says each entry is called, asked one entry at a time.
    one_by_one = [
        str(status.getPath().getName()) for status in fs._fs.listStatus(fs._path(str(tmp_path)))
    ]
    assert sorted(listed) == sorted(one_by_one)
    assert len(listed) == len(names)
    # Non-ASCII names are the JVM's to decode (UTF-8 when the app launched it; a JVM that
    # another test of this process started under LC_ALL=C reads them otherwise).
    assert {n for n in names if n.isascii()} <= set(listed)
    assert fs.list_names(str(tmp_path / "delta-1795977768000")) == []  # an empty directory
    assert fs.list_names(str(tmp_path / "missing")) == []
