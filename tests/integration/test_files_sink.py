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
    wait_for,
    wait_for_totals,
)

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

    def add(self, input_dir: Path, name: str, text: str) -> None:
        batch = drop_file_for_next_batch(input_dir, name, text.encode(), 1000)
        self.batches.setdefault(batch, []).append(text)

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


def kill_after_a_write(app: Any, timeout: float = 60) -> None:
    """Return as soon as the app logs that it wrote a batch's output (polled every 5 ms)."""
    written = re.compile(r"wrote (base|delta) batch_time_ms=")
    seen = len(written.findall(app.log()))

    def more() -> bool:
        return len(written.findall(app.log())) > seen

    wait_for("a batch's output written", more, timeout, app, 0.005)


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

    # kill -9 until a batch that had been written is replayed (the recovered checkpoint's
    # own batch always is; the kill may hit it before it wrote its output). The first kill
    # lands at random; the later ones right after a batch's output was written, before the
    # next batch's checkpoint (random kills on a loaded machine missed that 3 times).
    for attempt in range(4):
        reader.add(dirs["input"], f"k{attempt}.txt", make_text(rng, 30))
        reader.run_for(rng.uniform(0.2, 2.5))
        if attempt:
            kill_after_a_write(app)
        app.kill9()
        before = contents(dirs["output"])
        reader.add(dirs["input"], f"k{attempt}-while-down.txt", make_text(rng, 30))
        app = start_app(*args)
        match = app.wait_for_log(r"Recovered streaming context .* at batch_time_ms=(\d+)")
        recovered_ms = int(match.group(1))
        app.wait_for_log(rf"wrote (base|delta) batch_time_ms={recovered_ms}\b")
        after = contents(dirs["output"])
        # Written before the kill and again by the recovered run (by its debug lines).
        again = wrote(app)
        rewritten = {n for n in set(before) & set(after) if chain_batch(n) in again}
        for name in set(before) & set(after):
            assert after[name] == before[name], f"{name} differs after the replay"
        reader.add(dirs["input"], f"r{attempt}.txt", make_text(rng, 30))
        wait_for_totals(dirs["output"], truth(reader.texts()), app, timeout=120)
        reader.run_for(1)
        # The chain went on across the kill: the recovered context continued it.
        assert CHAIN_BROKE not in app.log()
        if rewritten:
            break
    assert rewritten, "no batch written before a kill was replayed in 4 attempts"
    app.wait_caught_up()
    reader.run_for(3)
    assert cli_totals(tmp_path, dirs["output"], "totals") == truth(reader.texts())
    assert app.terminate() == 0
    assert reader.reads >= 20, reader.reads
    assert reader.most_entries <= MOST_ENTRIES, reader.most_entries
    names = [p.name for p in dirs["output"].iterdir()]
    assert sum(batch_of(n, TOTALS) is not None for n in names) == KEEP, sorted(names)
