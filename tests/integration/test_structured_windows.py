"""Sliding windows on both engines, fed the same files: every window each wrote is exact.

The DStream engine and `--engine structured` run side by side with `--window 6 --slide
2`, each on its own input directory, and get the same files at the same moments; the
structured driver is killed with kill -9 once mid-run and restarted. Each engine's
windows are then compared with the windows of the files each micro-batch or batch read:
the DStream engine's batch of a file is set by its modification time
(drop_file_for_next_batch), the structured engine's by its window query's logs (the file
source's `sources/0/` and the offsets log's timestamps, rounded down to the interval).
"""

from __future__ import annotations

import random
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.structured.query_log import (
    COMMITS,
    batch_timestamp,
    last_batch,
    offsets_entry,
)
from streaming_app.structured.source_log import files_up_to, log_offset
from tests.integration.batch_waits import kill_mid_batch, micro_batch_that_read
from tests.integration.conftest import files_args
from tests.integration.harness import (
    drop_file,
    drop_file_for_next_batch,
    make_text,
    truth,
    wait_for,
    wait_for_totals,
    window_outputs,
    windows_of,
)
from tests.integration.log_lines import QUERY_STARTED

pytestmark = pytest.mark.timeout(420)

WINDOW_MS = 6000
BATCH_MS = 1000


def engine_dirs(base: Path, name: str) -> dict[str, Path]:
    """Checkpoint, input and output of one engine's run."""
    found = {part: base / name / part for part in ("checkpoint", "input", "output")}
    found["input"].mkdir(parents=True)
    return found


def structured_batches(checkpoint: Path, texts: dict[str, str]) -> dict[int, list[str]]:
    """The window query's micro-batches: interval time -> the texts of the files it read."""
    fs, windows = LocalFs(), str(checkpoint / "windows")
    last = last_batch(fs, str(checkpoint / "windows" / COMMITS))
    assert last is not None, "the window query committed nothing"
    found: dict[int, list[str]] = {}
    before: set[str] = set()
    for batch_id in range(last + 1):
        # The file source's position (a micro-batch without new files, run to move the
        # watermark on, has no entry of its own in sources/0/).
        entry = offsets_entry(fs, windows, batch_id)
        stamp = batch_timestamp(fs, windows, batch_id)
        assert entry is not None and stamp is not None
        position = log_offset(entry.sources[0])
        read = files_up_to(fs, windows, position) if position >= 0 else set()
        for name in sorted(read - before):
            found.setdefault(stamp // BATCH_MS * BATCH_MS, []).append(texts[name])
        before = read
    return found


def read_past(dirs: dict[str, Path], name: str) -> bool:
    """Whether the window query committed a micro-batch after the one that read `name`
    (the one after it moves the watermark on: the windows its file closes are written)."""
    windows = dirs["checkpoint"] / "windows"
    read = micro_batch_that_read(windows, name)
    last = last_batch(LocalFs(), str(windows / COMMITS))
    return read is not None and last is not None and last > read


# `slow` since 2026-11-30, in the rotating shares (to keep CI within its time). In the
# `not slow` suite: each engine's windows, test_kafka_chaos.py's (DStreams) and
# test_structured_postgres_windows.py's.
@pytest.mark.slow
def test_windows_of_both_engines_are_exact_on_the_same_files(
    tmp_path: Path, start_app: Any
) -> None:
    rng = random.Random(31)
    keep_all = tmp_path / "keep.ini"
    keep_all.write_text("[output]\noutput_keep = 1000\noutput_base_interval = 60\n")
    window = ["--window", str(WINDOW_MS // 1000), "--slide", "2", "--config", str(keep_all)]
    dstream, structured = engine_dirs(tmp_path, "dstream"), engine_dirs(tmp_path, "structured")
    dstream_args = files_args(dstream, *window, "--checkpoint-interval", "2")
    structured_args = ["--engine", "structured", *files_args(structured, *window)]
    texts: dict[str, str] = {}
    dstream_batches: dict[int, list[str]] = {}

    def add(name: str) -> None:
        texts[name] = make_text(rng, rng.randint(10, 30))
        data = texts[name].encode()
        batch = drop_file_for_next_batch(dstream["input"], name, data, BATCH_MS)
        dstream_batches.setdefault(batch, []).append(texts[name])
        drop_file(structured["input"], name, data)

    first = start_app(*dstream_args)
    app = start_app(*structured_args)
    first.wait_for_log(r"Started new streaming context")
    app.wait_for_log(QUERY_STARTED)
    for i in range(14):
        if i == 7:  # mid-run: kill -9 the structured driver mid-batch (checked), restart it
            kill_mid_batch(app, structured["checkpoint"], lambda: add(f"f07-{len(texts)}.txt"))
            app = start_app(*structured_args)
            app.wait_for_log(r"Recovered query id=")
        else:
            add(f"f{i:02d}.txt")
        time.sleep(rng.uniform(0.8, 2.5))  # input spacing: files over several windows
    wait_for_totals(structured["output"], truth(list(texts.values())), app, timeout=180)
    wait_for_totals(dstream["output"], truth(list(texts.values())), first, timeout=120)
    add("last.txt")  # closes the structured engine's open windows but the last ones
    wait_for_totals(structured["output"], truth(list(texts.values())), app, timeout=180)
    # The window query past the micro-batch that read last.txt: the windows it closes written.
    wait_for("the window query past last.txt", partial(read_past, structured, "last.txt"), 60, app)
    assert app.terminate() == 0, app.log()[-3000:]
    assert first.terminate() == 0, first.log()[-3000:]

    found = window_outputs(dstream["output"])
    assert len(found) >= 10, sorted(found)
    assert found == windows_of(dstream_batches, sorted(found), WINDOW_MS)
    windows = window_outputs(structured["output"])
    assert len(windows) >= 5, sorted(windows)
    assert all(end % 2000 == 0 for end in windows), sorted(windows)
    batches = structured_batches(structured["checkpoint"], texts)
    assert windows == windows_of(batches, sorted(windows), WINDOW_MS)
    # Every file read before the last closed window is in exactly window/slide windows.
    closed = max(windows)
    counted = sum(sum(w.values()) for w in windows.values())
    words = sum(sum(truth(t).values()) for b, t in batches.items() if b <= closed - WINDOW_MS)
    assert counted >= words * (WINDOW_MS // 2000)
    assert "Traceback" not in app.log()
