"""A checkpoint whose disk fills up (issue 44, item 2): said in one line, nothing lost.

The checkpoint directory is a small tmpfs of the test's own (root mounts it; unmounted
at the end), the input and the files sink elsewhere. After a first batch, a file fills
the tmpfs and input keeps coming. Either engine writes a log of its own there every batch
(the files read; Spark's offsets), so the next batch fails on it, and the run ends, exit
1 (a supervisor restarts it), with one line that names the checkpoint directory, the
reason and what to do, where Java says only `IOException: No space left on device`
(lifecycle/writable.py; the failure counts as a failed checkpoint on the endpoint). The
space freed, the restart recovers exact: the batch that failed is counted once.
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, truth, wait_for_totals
from tests.integration.log_lines import STARTED
from tests.integration.pg_helpers import ci

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs of this test's own."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0755", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs (root is needed): {done.stderr.strip()}"
        if ci():
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no space left; the file."""
    filler = disk / "filler"
    # Unbuffered: nothing is left to flush (and fail) on close. A MiB at a time, then the
    # last partial MiB 4 KiB at a time.
    with open(filler, "wb", buffering=0) as out:
        for size in (1 << 20, 4096):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


# The structured run `slow` since 2026-11-30, in the rotating shares (to keep CI within
# its time); the DStream run stays in the `not slow` suite.
@pytest.mark.parametrize("engine", ["dstream", pytest.param("structured", marks=pytest.mark.slow)])
def test_a_full_checkpoint_disk_ends_the_run_in_one_line_and_the_restart_is_exact(
    dirs: dict[str, Path], small_disk: Path, start_app: Any, engine: str
) -> None:
    dirs["checkpoint"] = small_disk / "checkpoint"
    args = [*files_args(dirs), "--engine", engine]
    app = start_app(*args)
    app.wait_for_log(STARTED[engine])
    texts = ["alpha beta beta\n"]
    drop_file(dirs["input"], "a.txt", texts[0].encode())
    wait_for_totals(dirs["output"], truth(texts), app)

    filler = fill(small_disk)
    texts.append("gamma gamma alpha\n")
    drop_file(dirs["input"], "b.txt", texts[-1].encode())
    assert app.wait(timeout=120) == 1, app.log()[-4000:]
    last = app.log().strip().splitlines()[-1]
    assert last == (
        f"Error: streaming failed: the checkpoint directory {dirs['checkpoint']} cannot be "
        "written (No space left on device); free space there or fix its permissions: a "
        "restart then resumes from the checkpoint"
    ), app.log()[-4000:]

    filler.unlink()
    again = start_app(*args)
    wait_for_totals(dirs["output"], truth(texts), again)
    texts.append("delta\n")
    drop_file(dirs["input"], "c.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), again)
    assert again.terminate() == 0
