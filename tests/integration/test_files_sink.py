"""The files sink end to end: bases and deltas over several base intervals, exact totals
whenever they are read, a replay after kill -9 rewriting the same content, a bounded
directory."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.recovery.metadata import read_metadata
from streaming_app.sinks.files_layout import (
    DELTA,
    TOTALS,
    Link,
    batch_of,
    read_link,
    read_totals,
    read_totals_dir,
)
from tests.integration.conftest import files_args
from tests.integration.harness import (
    App,
    cli_totals,
    drop_file_for_next_batch,
    make_text,
    truth,
    wait_for_totals,
)
from tests.integration.replay_kills import kill_after_writing, logged_files, wait_replayed

pytestmark = pytest.mark.timeout(420)

BASE_MS = 3000  # output_base_interval: a base every 3 one-second batches
KEEP = 2
# Bases and deltas at once: 2 bases and the deltas after the oldest (at most 6), one just
# published and not pruned yet, and the batches a replay has not rewritten yet.
MOST_ENTRIES = 9
WROTE = r"wrote (base|delta) batch_time_ms=(\d+)"
CHAIN_BROKE = "written as a base (every total)"


class Reader:
    """Reads the output as a user would, checking each read against the input's batches."""

    def __init__(self, output: Path) -> None:
        self.output = output
        self.batches: dict[int, list[str]] = {}  # batch time -> texts it reads
        self.reads = 0
        self.most_entries = 0
        self.kinds: dict[int, str] = {}

    def add(self, input_dir: Path, name: str, text: str) -> int:
        """Drop a file for the next batch but one; returns the batch time that reads it."""
        batch = drop_file_for_next_batch(input_dir, name, text.encode(), 1000)
        self.batches.setdefault(batch, []).append(text)
        return batch

    def texts(self) -> list[str]:
        return [text for texts in self.batches.values() for text in texts]

    def check(self) -> None:
        """One read: the totals as of the batch reached, never more or less."""
        if not self.output.exists():
            return
        chain = {
            batch: kind
            for path in self.output.iterdir()
            for kind in (TOTALS, DELTA)
            if (batch := batch_of(path.name, kind)) is not None
        }
        self.most_entries = max(self.most_entries, len(chain))
        self.kinds.update(chain)
        reached, totals = read_totals(str(self.output))
        if reached is None:
            return
        expected = truth([t for b, texts in self.batches.items() if b <= reached for t in texts])
        assert totals == expected, f"read as of batch_time_ms={reached}"
        self.reads += 1

    def run_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.check()
            time.sleep(0.2)


def chain_batch(name: str) -> int | None:
    """The batch time of a base or delta directory name."""
    base = batch_of(name, TOTALS)
    return base if base is not None else batch_of(name, DELTA)


def contents(output: Path) -> dict[str, tuple[dict[str, Any], Link | None]]:
    """Every base and delta in the output dir: its totals and its chain marker.

    A directory the running app prunes or replaces while it is read is left out.
    """
    found = {}
    for path in output.iterdir():
        if chain_batch(path.name) is not None:
            try:
                found[path.name] = (read_totals_dir(str(path)), read_link(str(path)))
            except FileNotFoundError:
                continue
    return found


def wrote(app: App) -> dict[int, str]:
    """The batches the app wrote, by batch time: base or delta (its debug lines)."""
    return {int(ms): kind for kind, ms in re.findall(WROTE, app.log())}


def test_bases_and_deltas_read_exactly_through_a_kill_9(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path
) -> None:
    rng = random.Random(18)
    ini = tmp_path / "output.ini"
    ini.write_text(f"[output]\noutput_keep = {KEEP}\noutput_base_interval = {BASE_MS // 1000}\n")
    args = files_args(dirs, "--config", str(ini), "--log-level", "debug")
    reader = Reader(dirs["output"])
    app = start_app(*args)
    app.wait_for_log(r"Started new streaming context")
    # Input over four base intervals, with idle batches in between.
    for i in range(8):
        reader.add(dirs["input"], f"a{i}.txt", make_text(rng, rng.randint(5, 40)))
        reader.run_for(rng.uniform(0.5, 2))
    wait_for_totals(dirs["output"], truth(reader.texts()), app)
    reader.run_for(2)
    context = read_metadata(LocalFs(), str(dirs["checkpoint"]))
    assert context is not None
    first = wrote(app)
    assert set(first.values()) == {"base", "delta"}, first
    # Bases at the multiples of the interval (and the first batch); deltas in between.
    start = min(first)
    assert all((kind == "base") == (ms % BASE_MS == 0 or ms == start) for ms, kind in first.items())
    # The context's first batch: a base, logged unless one was due anyway.
    assert app.log().count(CHAIN_BROKE) == (0 if start % BASE_MS == 0 else 1)
    assert TOTALS in reader.kinds.values() and DELTA in reader.kinds.values()
    for name, (_, link) in contents(dirs["output"]).items():
        assert link is not None and link.context == context.app_id, name

    # kill -9 right after the output of a batch that read a file (checked in the files
    # source's log), until the restart replays that batch: its replay must read the file
    # again (the restored state does not hold it) and write the same output. A kill that a
    # later checkpoint outran (the batch not replayed) is tried again with another file.
    replayed = False
    for attempt in range(4):
        name = f"k{attempt}.txt"
        batch = reader.add(dirs["input"], name, make_text(rng, 30))
        kill_after_writing(app, batch)
        assert logged_files(dirs["checkpoint"], batch) == [name]
        before = contents(dirs["output"])
        assert any(chain_batch(n) == batch for n in before), sorted(before)
        reader.add(dirs["input"], f"k{attempt}-while-down.txt", make_text(rng, 30))
        app = start_app(*args)
        replayed = wait_replayed(app, batch)
        after = contents(dirs["output"])
        for n in set(before) & set(after):
            assert after[n] == before[n], f"{n} differs after the replay"
        reader.add(dirs["input"], f"r{attempt}.txt", make_text(rng, 30))
        wait_for_totals(dirs["output"], truth(reader.texts()), app, timeout=120)
        reader.run_for(1)
        # The chain went on across the kill: the recovered context continued it.
        assert CHAIN_BROKE not in app.log()
        if replayed:
            break
    assert replayed, "in 4 kills, no batch that read a file was replayed after its output"
    app.wait_caught_up()
    reader.run_for(3)
    assert cli_totals(tmp_path, dirs["output"], "totals") == truth(reader.texts())
    assert app.terminate() == 0
    assert reader.reads >= 20, reader.reads
    assert reader.most_entries <= MOST_ENTRIES, reader.most_entries
    names = [p.name for p in dirs["output"].iterdir()]
    assert sum(batch_of(n, TOTALS) is not None for n in names) == KEEP, sorted(names)
