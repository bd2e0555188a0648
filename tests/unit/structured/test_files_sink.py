"""The structured files sink without Spark: micro-batches named by their timestamps, bases of
every total the state holds, replays, and the totals read back as `streaming-app totals` does."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from streaming_app.sinks.files import FilesSettings, base_due
from streaming_app.sinks.files_layout import (
    DELTA,
    TOTALS,
    read_link,
    read_totals,
    temp_name,
    totals_name,
)
from streaming_app.structured.files_sink import write_files
from tests.unit.sinks.test_files import DiskFs, write_pairs

# Micro-batch timestamps are not at multiples of the interval, and batches without input
# never run: a base is due when a multiple of 4 s lies since the micro-batch before.
TIMES = [10_300, 11_300, 13_700, 14_200, 16_900]
WORDS = ["a b b", "b c", "a", "d d d", "a e"]
KINDS = [TOTALS, DELTA, TOTALS, DELTA, TOTALS]


class Query:
    """One query writing micro-batches, with the totals its state would hold."""

    def __init__(self, out: Path, context: str = "query-1", keep: int = 2) -> None:
        self.settings = FilesSettings(str(out), keep, 4000, 1000, context)
        self.totals: Counter[str] = Counter()
        self.fs = DiskFs()

    def batch(self, batch_id: int, words: str, due: bool | None = None) -> str:
        """Micro-batch `batch_id`; due: whether a base is due [None: by the times]."""
        changed = Counter(words.split())
        self.totals.update(changed)
        changes = [(word, self.totals[word]) for word in changed]
        previous = TIMES[batch_id - 1] if batch_id else TIMES[0] - 1000
        every = sorted(self.totals.items())  # what the executors read from the state

        return write_files(
            self.fs,  # type: ignore[arg-type]  # a HadoopFs stand-in
            self.settings,
            TIMES[batch_id],
            previous,
            lambda temp: write_pairs(temp, changes),
            lambda temp: write_pairs(temp, every),
            base_due(self.settings, TIMES[batch_id], previous) if due is None else due,
        )


def test_deltas_between_bases_and_the_totals_exact_after_every_micro_batch(
    tmp_path: Path,
) -> None:
    query = Query(tmp_path)
    for batch_id, words in enumerate(WORDS):
        assert query.batch(batch_id, words) == KINDS[batch_id]
        assert read_totals(str(tmp_path)) == (TIMES[batch_id], dict(query.totals))
        link = read_link(str(tmp_path / totals_name(TIMES[batch_id], KINDS[batch_id])))
        assert link is not None and link.context == "query-1"
        assert link.previous == (TIMES[batch_id - 1] if batch_id else TIMES[0] - 1000)


def test_a_replayed_micro_batch_keeps_what_it_wrote(tmp_path: Path) -> None:
    query = Query(tmp_path)
    for batch_id, words in enumerate(WORDS[:4]):
        query.batch(batch_id, words)
    path = tmp_path / totals_name(TIMES[3], DELTA)
    before = sorted((p.name, p.read_bytes()) for p in path.iterdir())
    query.totals.subtract(Counter(WORDS[3].split()))  # the state as of batch 2, again
    assert query.batch(3, WORDS[3]) == DELTA
    assert sorted((p.name, p.read_bytes()) for p in path.iterdir()) == before
    assert read_totals(str(tmp_path))[1] == dict(query.totals)


def test_a_micro_batch_killed_while_writing_writes_anew(tmp_path: Path) -> None:
    query = Query(tmp_path)
    for batch_id, words in enumerate(WORDS[:2]):
        query.batch(batch_id, words)
    leftover = tmp_path / temp_name(TIMES[2], TOTALS)
    leftover.mkdir()
    (leftover / "part-00000").write_text("junk\n")
    assert query.batch(2, WORDS[2]) == TOTALS
    assert not leftover.exists()
    assert read_totals(str(tmp_path)) == (TIMES[2], dict(query.totals))


def test_an_output_lost_before_a_micro_batch_gets_a_base_of_every_total(tmp_path: Path) -> None:
    query = Query(tmp_path)
    for batch_id, words in enumerate(WORDS[:2]):
        query.batch(batch_id, words)
    shutil.rmtree(tmp_path / totals_name(TIMES[1], DELTA))  # removed while stopped
    query.settings = FilesSettings(str(tmp_path), 2, 40_000, 1000, "query-1")  # no base due
    assert query.batch(2, WORDS[2]) == TOTALS  # the chain broke: every total, from the state
    assert read_totals(str(tmp_path)) == (TIMES[2], dict(query.totals))


def test_a_base_left_to_the_next_micro_batch_makes_a_delta_then_a_base(tmp_path: Path) -> None:
    # As after a restart (sinks.py `Deferred`): micro-batch 2's base, due, goes to 3.
    query = Query(tmp_path)
    kinds = [query.batch(0, WORDS[0]), query.batch(1, WORDS[1])]
    kinds.append(query.batch(2, WORDS[2], due=False))
    assert read_totals(str(tmp_path)) == (TIMES[2], dict(query.totals))
    kinds.append(query.batch(3, WORDS[3], due=True))
    assert kinds == [TOTALS, DELTA, DELTA, TOTALS]
    assert read_totals(str(tmp_path)) == (TIMES[3], dict(query.totals))
    link = read_link(str(tmp_path / totals_name(TIMES[2], DELTA)))
    assert link is not None and link.previous == TIMES[1]


def test_a_broken_chain_makes_a_base_even_when_none_is_due(tmp_path: Path) -> None:
    query = Query(tmp_path)
    for batch_id, words in enumerate(WORDS[:2]):
        query.batch(batch_id, words)
    shutil.rmtree(tmp_path / totals_name(TIMES[1], DELTA))
    assert query.batch(2, WORDS[2], due=False) == TOTALS
    assert read_totals(str(tmp_path)) == (TIMES[2], dict(query.totals))


def test_another_query_on_the_same_output_starts_its_own_chain(tmp_path: Path) -> None:
    Query(tmp_path, "query-0").batch(0, "x y")
    query = Query(tmp_path)
    assert query.batch(0, WORDS[0]) == TOTALS
    assert query.batch(1, WORDS[1]) == DELTA
    assert read_totals(str(tmp_path))[1] == dict(query.totals)


def test_the_chain_to_the_micro_batch_before_is_found_from_names_and_markers(
    tmp_path: Path,
) -> None:
    from streaming_app.common.fs import LocalFs
    from streaming_app.structured.files_base import chain_dirs

    query = Query(tmp_path, keep=3)
    for batch_id, words in enumerate(WORDS[:4]):  # base, delta, base, delta
        query.batch(batch_id, words)
    fs, out = LocalFs(), str(tmp_path)
    assert chain_dirs(fs, out, "query-1", TIMES[3]) == [
        str(tmp_path / totals_name(TIMES[2], TOTALS)),
        str(tmp_path / totals_name(TIMES[3], DELTA)),
    ]
    assert chain_dirs(fs, out, "query-1", TIMES[1]) == [
        str(tmp_path / totals_name(TIMES[0], TOTALS)),
        str(tmp_path / totals_name(TIMES[1], DELTA)),
    ]
    assert chain_dirs(fs, out, "query-2", TIMES[3]) is None  # another query's output
    assert chain_dirs(fs, out, "query-1", TIMES[3] + 1) is None  # does not reach it
    (tmp_path / totals_name(TIMES[3], DELTA) / "_SUCCESS").unlink()  # incomplete
    assert chain_dirs(fs, out, "query-1", TIMES[3]) is None
    # The newest line of each key: test_structured_lines.py, on Spark.
