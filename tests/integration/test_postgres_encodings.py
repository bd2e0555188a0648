"""The postgres sink in databases of every encoding: SQL_ASCII round trips, others refused."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from streaming_app.errors import EXIT_USAGE, SinkSetupError
from streaming_app.sinks.postgres.writer import PostgresWriter, read_progress, read_totals
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, truth
from tests.integration.pg_helpers import fresh_database, postgres_config, wait_for_pg_totals

pytestmark = pytest.mark.timeout(300)
# Lower-case NFC words, so the app's tokenizer keeps them as they are.
WORDS = ["café", "straße", "日本語", "ελληνικά", "mañana", "żółw", "plain", "w01"]


@pytest.fixture
def ascii_dsn(pg_dsn: str) -> Iterator[str]:
    """A SQL_ASCII database of its own (what initdb makes under LC_ALL=C), dropped at the end."""
    with fresh_database(pg_dsn, "SQL_ASCII") as dsn:
        yield dsn


def stored_bytes(dsn: str, table: str) -> set[bytes]:
    """The words as the database holds them: a connection that asks for no conversion."""
    with psycopg.connect(dsn, client_encoding="SQL_ASCII") as conn:
        rows = conn.execute(sql.SQL("SELECT word FROM {}").format(sql.Identifier(table)))
        return {bytes(word) for (word,) in rows.fetchall()}


def test_words_and_sums_round_trip_through_a_sql_ascii_database(ascii_dsn: str) -> None:
    position = {"context": "c1", "files": ["/in/données-1.txt", "/in/日本.txt"]}
    with PostgresWriter(ascii_dsn, "wc") as writer:
        writer.ensure_schema()  # the table it has just created is accepted
        assert writer.write_batch(1000, [(w, i + 1) for i, w in enumerate(WORDS)], position)
        assert writer.write_batch(2000, [("café", 10), ("新しい", 1)], {"context": "c1"})
        assert not writer.write_batch(2000, [("café", 99)], None)  # a replay
        assert writer.last_progress() == (2000, {"context": "c1"})
    expected = {w: i + 1 for i, w in enumerate(WORDS)} | {"café": 10, "新しい": 1}
    assert read_totals(ascii_dsn, "wc") == expected
    assert stored_bytes(ascii_dsn, "wc") == {w.encode() for w in expected}  # UTF-8 bytes
    with PostgresWriter(ascii_dsn, "wc") as restarted:  # a restarted driver checks again
        restarted.ensure_schema()
        assert restarted.write_batch(3000, [("w01", 9)], position, replace=True)
        assert restarted.last_progress() == (3000, position)
    assert read_totals(ascii_dsn, "wc") == {"w01": 9}
    progress = read_progress(ascii_dsn, "wc")
    assert progress is not None and progress["source_position"] == position

    sums = {"kunde-ä": Decimal("12.35"), "客户": Decimal("-0.05"), "c3": Decimal("1E-30")}
    with PostgresWriter(ascii_dsn, "sums", value_type="numeric") as keyed:
        assert keyed.write_batch(1000, sums.items())
        assert keyed.write_window(1000, [("客户", Decimal("1.10"))])
    assert read_totals(ascii_dsn, "sums") == sums
    assert read_totals(ascii_dsn, "sums", window=True) == {"客户": Decimal("1.10")}
    with PostgresWriter(ascii_dsn, "sums") as counts, pytest.raises(SinkSetupError) as caught:
        counts.ensure_schema()  # the other job's table: refused, naming the real type
    assert "has a numeric count column, but this job writes bigint" in str(caught.value)


@pytest.mark.parametrize("encoding", ["LATIN1", "EUC_JP"])
def test_a_database_that_cannot_hold_every_word_is_refused_before_any_table(
    pg_dsn: str, encoding: str
) -> None:
    with fresh_database(pg_dsn, encoding) as dsn:
        with PostgresWriter(dsn, "wc") as writer, pytest.raises(SinkSetupError) as caught:
            writer.ensure_schema()
        assert f"has encoding {encoding}, which cannot store every word" in str(caught.value)
        assert caught.value.exit_code == EXIT_USAGE
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT to_regclass('wc')").fetchone() == (None,)


def test_the_app_counts_non_ascii_words_exactly_into_a_sql_ascii_database(
    dirs: dict[str, Path], start_app: Any, ascii_dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(30)
    texts: list[str] = []
    args = files_args(
        dirs,
        "--sink", "postgres", "--postgres-table", "wc",
        "--config", str(postgres_config(tmp_path, ascii_dsn)),
    )  # fmt: skip
    app = start_app(*args)
    app.wait_for_log(r"Started new streaming context")
    for n in range(3):
        texts.append("".join(" ".join(rng.choices(WORDS, k=6)) + "\n" for _ in range(20)))
        drop_file(dirs["input"], f"{n}-ünïcode.txt", texts[-1].encode())
        wait_for_pg_totals(ascii_dsn, "wc", truth(texts))
    assert app.terminate() == 0
    assert read_totals(ascii_dsn, "wc") == truth(texts)
    assert "Traceback" not in app.log()


# Words the staging COPY's CSV (the structured engine's) must quote or keep as they are.
AWKWARD = ["a,b", 'say "hi"', "line\nbreak", "cr\rlf", "tab\there", "back\\slash", "\\N", "NULL"]


@pytest.mark.parametrize("encoding", ["UTF8", "SQL_ASCII"])
def test_a_frames_staged_rows_hold_every_word_and_total_as_it_is(
    pg_dsn: str, encoding: str
) -> None:
    import pyarrow as pa

    from streaming_app.sinks.postgres.staging import stage_batches

    words = AWKWARD + WORDS
    totals = [str(i + 1) if i % 2 else f"{i}.25" for i in range(len(words))]
    half = len(words) // 2
    batches = [
        pa.RecordBatch.from_pydict({"part": [2] * len(ws), "key": ws, "total": ts})
        for ws, ts in ((words[:half], totals[:half]), (words[half:], totals[half:]))
    ]
    with fresh_database(pg_dsn, encoding) as dsn:
        with PostgresWriter(dsn, "sums", value_type="numeric") as writer:
            writer.ensure_schema()
            [result] = stage_batches(writer.staging_target(1000), iter(batches))
            assert result.to_pylist() == [
                {"part": 2, "count": len(words), "kind": None, "reason": None}
            ]
            assert writer.merge_staged(1000, {2: len(words)})
        assert read_totals(dsn, "sums") == {
            w: Decimal(t) for w, t in zip(words, totals, strict=True)
        }
