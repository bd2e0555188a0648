"""The files sink's writing side without Spark: which batches are bases and which deltas,
the chain markers, replays, new contexts and pruning, read back through read_totals."""

from __future__ import annotations

import logging
import os
from collections import Counter
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.settings.loading import load_config
from streaming_app.sinks.files import FilesSettings, write_chain
from streaming_app.sinks.files_layout import (
    CHAIN_MARKER,
    DELTA,
    SUCCESS_MARKER,
    TOTALS,
    Link,
    batch_of,
    format_total,
    parse_link,
    read_totals,
    temp_name,
    totals_name,
)
from streaming_app.sinks.parts import write_part

BATCH = 1000


class DiskFs(LocalFs):
    """HadoopFs's calls on the local disk (HadoopFs needs a JVM)."""

    def publish_dir(self, temp: str, final: str) -> None:
        self.delete(final)
        os.rename(temp, final)


def write_pairs(temp: str, pairs: list[tuple[str, int]], parts: int = 1) -> None:
    """Part files and _SUCCESS as the executors write them (parts.py's task, in-process)."""
    os.makedirs(temp)
    for number in range(parts):
        lines = [format_total(pair) for pair in pairs[number::parts]]
        assert list(write_part(temp, number, lines)) == [len(lines)]
    Path(temp, SUCCESS_MARKER).write_text("")


class Run:
    """One context writing batches to an output dir, with the totals the state would hold."""

    def __init__(self, out: Path, context: str, base_every: int = 4, keep: int = 2) -> None:
        self.settings = FilesSettings(str(out), keep, base_every * BATCH, BATCH, context)
        self.totals: dict[str, int] = {}
        self.fs = DiskFs()

    def batch(self, batch_ms: int, words: str, changes_known: bool = True) -> str:
        """Count the words into the totals and write the batch; returns its kind."""
        changed = Counter(words.split())
        for word, count in changed.items():
            self.totals[word] = self.totals.get(word, 0) + count
        pairs = [(word, self.totals[word]) for word in changed]
        return write_chain(
            self.fs,  # type: ignore[arg-type]  # a HadoopFs stand-in
            self.settings,
            batch_ms,
            (lambda temp: write_pairs(temp, pairs)) if changes_known else None,
            self.write_base,
        )

    def write_base(self, temp: str) -> None:
        write_pairs(temp, sorted(self.totals.items()), parts=2)


def kinds(out: Path) -> dict[int, str]:
    found = {}
    for name in os.listdir(out):
        for kind in (TOTALS, DELTA):
            if (batch := batch_of(name, kind)) is not None:
                found[batch] = kind
    return found


def test_bases_at_multiples_of_the_interval_and_deltas_in_between(tmp_path: Path) -> None:
    run = Run(tmp_path, "ctx-a", keep=10)
    written = {t: run.batch(t, f"w{t % 3} x") for t in range(5000, 14000, BATCH)}
    # The first batch of a context is a base; then a base every 4 batches.
    assert written == {
        5000: TOTALS, 6000: DELTA, 7000: DELTA, 8000: TOTALS, 9000: DELTA,
        10000: DELTA, 11000: DELTA, 12000: TOTALS, 13000: DELTA,
    }  # fmt: skip
    assert kinds(tmp_path) == written
    assert read_totals(str(tmp_path)) == (13000, run.totals)
    delta = tmp_path / totals_name(13000, DELTA)
    assert parse_link((delta / CHAIN_MARKER).read_bytes()) == Link("ctx-a", 12000, "delta")
    assert (delta / "part-00000").read_text() == "w1\t3\nx\t9\n"  # only what 13000 changed
    base = tmp_path / totals_name(12000)
    assert parse_link((base / CHAIN_MARKER).read_bytes()) == Link("ctx-a", 11000, "base")


def test_the_totals_are_exact_after_every_batch(tmp_path: Path) -> None:
    run = Run(tmp_path, "ctx-a", base_every=3, keep=1)
    for t in range(1000, 30000, BATCH):
        run.batch(t, "" if t % 7000 == 0 else f"a b{t % 5} c{t % 2}")  # some idle batches
        assert read_totals(str(tmp_path)) == (t, run.totals)
    assert not [n for n in os.listdir(tmp_path) if n.startswith("_")]


def test_an_idle_batch_writes_an_empty_delta(tmp_path: Path) -> None:
    run = Run(tmp_path, "ctx-a")
    run.batch(1000, "a")
    assert run.batch(2000, "") == DELTA
    assert (tmp_path / totals_name(2000, DELTA) / "part-00000").read_text() == ""
    assert read_totals(str(tmp_path)) == (2000, {"a": 1})


def test_a_state_that_cannot_tell_its_changes_writes_a_base_every_batch(tmp_path: Path) -> None:
    run = Run(tmp_path, "ctx-a", keep=3)
    for t in range(1000, 7000, BATCH):
        assert run.batch(t, "a", changes_known=False) == TOTALS
    assert sorted(kinds(tmp_path)) == [4000, 5000, 6000]
    assert read_totals(str(tmp_path)) == (6000, {"a": 6})


def test_a_replayed_batch_rewrites_the_same_content(tmp_path: Path) -> None:
    run = Run(tmp_path, "ctx-a")
    for t, words in ((5000, "a"), (6000, "b"), (7000, "a c")):
        run.batch(t, words)
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    # Recovered from the checkpoint of 5000: the state is as it was then, 6000 and 7000 rerun.
    replay = Run(tmp_path, "ctx-a")
    replay.totals = {"a": 1}
    assert [replay.batch(6000, "b"), replay.batch(7000, "a c")] == [DELTA, DELTA]
    after = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before


def test_a_replay_with_a_leftover_temp_dir_writes_it_anew(tmp_path: Path) -> None:
    run = Run(tmp_path, "ctx-a")
    run.batch(5000, "a")
    half = tmp_path / temp_name(6000, DELTA)
    half.mkdir()
    (half / "part-00000").write_text("a\t100\n")  # killed while writing 6000
    run.batch(6000, "a")
    assert not half.exists()
    assert read_totals(str(tmp_path)) == (6000, {"a": 2})


def test_a_new_context_never_chains_onto_another(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = Run(tmp_path, "ctx-a")
    for t in (5000, 6000, 7000):
        first.batch(t, "a")
    # A new checkpoint (seeded from a snapshot: it starts with the totals) on the same dir.
    second = Run(tmp_path, "ctx-b")
    second.totals = dict(first.totals)
    with caplog.at_level(logging.INFO, logger="streaming_app.sinks.files"):
        assert second.batch(9000, "b") == TOTALS  # 8000 is missing
        assert second.batch(10000, "b") == DELTA
    assert "batch_time_ms=9000 written as a base (every total): no output" in caplog.text
    assert read_totals(str(tmp_path)) == (10000, {"a": 3, "b": 2})
    # Even right after the other context's last batch.
    third = Run(tmp_path, "ctx-c")
    third.totals = dict(second.totals)
    with caplog.at_level(logging.INFO, logger="streaming_app.sinks.files"):
        assert third.batch(11000, "c") == TOTALS
    assert "of another context (ctx-b)" in caplog.text
    assert read_totals(str(tmp_path)) == (11000, {"a": 3, "b": 2, "c": 1})


def test_an_upgrade_writes_a_base_after_the_old_full_totals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for t, text in ((1000, "a\t1\n"), (2000, "a\t2\n")):  # 0.3.0: every total, no marker
        old = tmp_path / totals_name(t)
        old.mkdir()
        (old / "part-00000").write_text(text)
        (old / SUCCESS_MARKER).write_text("")
    new = Run(tmp_path, "ctx-new", keep=2)
    new.totals = {"a": 2}
    with caplog.at_level(logging.INFO, logger="streaming_app.sinks.files"):
        assert new.batch(3000, "b") == TOTALS
    assert "has no chain marker (written before 0.4.0)" in caplog.text
    assert [new.batch(t, "a") for t in (5000 - BATCH, 5000, 6000)] == [TOTALS, DELTA, DELTA]
    assert read_totals(str(tmp_path)) == (6000, {"a": 5, "b": 1})
    # The old directories count as bases: pruned like the new ones.
    assert sorted(kinds(tmp_path)) == [3000, 4000, 5000, 6000]


def test_the_interval_is_a_setting_with_the_checkpoint_interval_as_default() -> None:
    config = load_config(env={}, cli={"batch_interval": "2", "checkpoint_interval": "8"})
    assert config.output_base_ms == 8000
    configured = load_config(env={"STREAMING_APP_OUTPUT_BASE_INTERVAL": "30"}, cli={})
    assert configured.output_base_ms == 30_000
    settings = FilesSettings.from_config(
        load_config(env={}, cli={"sinks": "files", "output_dir": "/out", "output_keep": "4"}),
        "ctx",
    )
    assert settings == FilesSettings("/out", 4, 10_000, 1000, "ctx")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STREAMING_APP_OUTPUT_BASE_INTERVAL": "1.5"}, "must be a multiple of the batch interval"),
        ({"STREAMING_APP_OUTPUT_BASE_INTERVAL": "0"}, "must be a positive number of seconds"),
        ({"STREAMING_APP_OUTPUT_BASE_INTERVAL": "-2"}, "must be a positive number of seconds"),
        ({"STREAMING_APP_OUTPUT_BASE_INTERVAL": "x"}, "is not a number of seconds"),
    ],
)
def test_a_bad_interval_is_a_config_error_naming_the_key(env: dict[str, str], message: str) -> None:
    from streaming_app.errors import ConfigError

    with pytest.raises(ConfigError, match=message) as info:
        load_config(env=env, cli={})
    assert "environment STREAMING_APP_OUTPUT_BASE_INTERVAL" in str(info.value)
