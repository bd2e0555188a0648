"""The structured engine's lines made by Spark itself (local mode, in this process): the files
sink's lines are byte for byte, a snapshot's JSON lines the same JSON as, what the Python
formatters write of the exact pairs, for awkward keys and decimals alike; a base laid from a
chain of output directories keeps each key's newest line; an empty frame still writes a
directory both readers take; a sum beyond 38 digits stays exact; one pass over the changed
totals counts them, ranks the top N as the driver's sort would, and writes the lines the
Spark writer writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from streaming_app.recovery.snapshots import format_line, parse_line
from streaming_app.sinks.files_layout import format_total
from streaming_app.structured.changes_pass import run_pass
from streaming_app.structured.files_base import chained_lines
from streaming_app.structured.state_layout import exact
from streaming_app.structured.totals import (
    LINE,
    count_and_sum,
    exact_pair,
    snapshot_lines,
    total_lines,
)
from tests.integration.spark_local import local_session

KEYS = [
    "plain",
    'quote"d',
    "back\\slash",
    "tab\tinside",
    "ctrl\x01\x1f\x7f",
    "é€😀/\u2028",
    "bracket]",
    "",
]
DECIMALS = [
    Decimal("0"),
    Decimal("100"),
    Decimal("-1.5"),
    Decimal("0.0000001"),
    Decimal("1234567890123456789012345678.0000000001"),
    Decimal("-0.0000000001"),
    Decimal("12.5000000000"),
    Decimal("7"),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    # Arrow in the Python workers: this interpreter's venv.
    with local_session("test-structured-lines", {"spark.sql.shuffle.partitions": "2"}) as session:
        yield session


def _frame(spark: Any, rows: list[tuple[str, Any]], value_type: str) -> Any:
    return spark.createDataFrame(rows, f"key string, total {value_type}").repartition(3)


def _lines(frame: Any) -> list[str]:
    return sorted(row[0] for row in frame.collect())


@pytest.mark.parametrize(
    ("value_type", "values"),
    [
        ("bigint", [0, 1, 42, 2**62, 7, 123456789, 3, 10]),
        ("decimal(38,10)", DECIMALS),
        ("decimal(38,0)", [Decimal(v) for v in (0, 100, -5, 10**37, 1, 2, 3, 40)]),
    ],
)
def test_lines_made_by_spark_are_the_python_formatters_lines(
    spark: Any, value_type: str, values: list[Any]
) -> None:
    rows = list(zip(KEYS, values, strict=True))
    frame = _frame(spark, rows, value_type)
    pairs = [exact_pair(row) for row in rows]
    assert _lines(total_lines(frame)) == sorted(format_total(pair) for pair in pairs)
    snapshot = _lines(snapshot_lines(frame))
    assert sorted(parse_line(line) for line in snapshot) == sorted(pairs)
    # Byte for byte too, but for one escape: Spark writes \u001F where Python writes \u001f.
    assert set(snapshot) - {format_line(pair) for pair in pairs} == {
        format_line(pair).replace("\\u001f", "\\u001F") for pair in pairs if "\x1f" in pair[0]
    }


def test_a_written_snapshot_of_no_totals_is_read_by_both_readers(
    spark: Any, tmp_path: Path
) -> None:
    empty = _frame(spark, [], "bigint")
    out = str(tmp_path / "empty")
    snapshot_lines(empty).write.text(out)
    assert (tmp_path / "empty" / "_SUCCESS").exists()
    assert spark.sparkContext.textFile(f"{out}/part-*").collect() == []  # a seed's reader
    assert spark.read.text(f"{out}/part-*").collect() == []  # a chained base's reader
    assert count_and_sum(empty) == (0, 0)


def test_a_chained_base_keeps_each_keys_newest_line(spark: Any, tmp_path: Path) -> None:
    def part(name: str, lines: list[str]) -> str:
        directory = tmp_path / name
        directory.mkdir()
        (directory / "part-00000").write_text("".join(f"{line}\n" for line in lines))
        (directory / "part-00001").write_text("")
        return str(directory)

    # \u2028 and \x85 end a line for Java's `.`, not for Hadoop's line reader.
    base = part("base", ["a\t1", "b\t2", "tab\tkey\t3", "gone\t9", "x\u2028\t1", "y\x85\t2"])
    delta = part("delta", ["a\t4", "tab\tkey\t5"])
    changes = _frame(spark, [("b", 6), ("tab\tkey", 8), ("new", 1)], "bigint")
    lines = _lines(chained_lines(spark, [base, delta], changes))
    assert lines == sorted(
        ["a\t4", "b\t6", "tab\tkey\t8", "gone\t9", "new\t1", "x\u2028\t1", "y\x85\t2"]
    )


def test_a_sum_beyond_38_digits_stays_exact(spark: Any) -> None:
    big = Decimal("9" * 37 + ".5")
    rows = [(f"k{i}", big) for i in range(20)]
    frame = _frame(spark, rows, "decimal(38,1)")
    words, total = count_and_sum(frame)
    assert words == 20
    assert total == exact(big * 20)
    assert count_and_sum(_frame(spark, [("a", 2), ("b", 3)], "bigint")) == (2, 5)


TYPES = [
    ("bigint", [0, 1, 42, 2**62, 7, 123456789, 3, 10]),
    ("decimal(38,10)", DECIMALS),
]


@pytest.mark.parametrize(("value_type", "values"), TYPES)
def test_one_pass_counts_ranks_and_writes_the_changed_totals(
    spark: Any, tmp_path: Path, value_type: str, values: list[Any]
) -> None:
    # Ties on the total rank by key; more partitions than rows: some are empty.
    rows = [*zip(KEYS, values, strict=True), ("tie-b", values[3]), ("tie-a", values[3])]
    frame = spark.createDataFrame(rows, f"key string, total {value_type}").repartition(16)
    pairs = [exact_pair(row) for row in rows]
    expected = sorted(pairs, key=lambda pair: (-pair[1], pair[0]))
    for n in (0, 1, 3, 20):
        found = run_pass(frame, n, None)
        assert found.changed == len(rows)
        assert found.top == expected[:n]
    out = tmp_path / "delta"
    out.mkdir()
    found = run_pass(frame, 2, str(out))
    assert (found.changed, found.top) == (len(rows), expected[:2])
    written = sorted(
        line  # split at "\n" only: a key may hold \u2028, which splitlines() splits at
        for part in out.glob("part-*")
        for line in part.read_text(encoding="utf-8").split("\n")[:-1]
    )
    assert written == _lines(total_lines(frame))
    assert not [name for name in os.listdir(out) if name.startswith(".")]  # no temp left
    assert sorted(row[LINE] for row in spark.read.text(str(out)).collect()) == written


def test_a_stop_quiets_every_state_store_logger_and_no_other(spark: Any) -> None:
    """The graceful stop's last step before `spark.stop()`: the state store's maintenance
    threads (StateStore's timer, RocksDBStateStoreProvider's snapshot upload) log errors
    only, whatever class they log from; Spark's other loggers are as they were."""
    from streaming_app.structured.run import STATE_STORE_LOGGER, quiet_state_store_maintenance

    jvm = spark.sparkContext._jvm
    config = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()
    state = "org.apache.spark.sql.execution.streaming.state."
    watched = [state + "StateStore", state + "RocksDBStateStoreProvider", state + "RocksDB"]
    other = "org.apache.spark.SparkContext"
    assert all(config.getLoggerConfig(name).getName() != STATE_STORE_LOGGER for name in watched)
    quiet_state_store_maintenance(spark.sparkContext)
    for name in watched:
        found = config.getLoggerConfig(name)
        assert (found.getName(), str(found.getLevel())) == (STATE_STORE_LOGGER, "ERROR"), name
    assert config.getLoggerConfig(other).getName() != STATE_STORE_LOGGER
