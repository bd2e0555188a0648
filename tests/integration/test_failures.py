"""Failures a supervisor must tell apart: a failed batch (exit 1) vs an unreadable checkpoint."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, truth, wait_for_totals

pytestmark = pytest.mark.timeout(300)


def test_a_failing_batch_exits_1_and_the_restart_loses_nothing(
    dirs: dict[str, Path], start_app: Any
) -> None:
    app = start_app(*files_args(dirs))
    app.wait_for_log(r"Started new streaming context")
    drop_file(dirs["input"], "a.txt", b"one two two\n")
    wait_for_totals(dirs["output"], truth(["one two two\n"]), app)
    # The files sink cannot write under a regular file: the next batch's output fails.
    put_file_in_place_of(dirs["output"])
    drop_file(dirs["input"], "b.txt", b"three three three\n")
    assert app.wait(timeout=120) == 1
    assert "ERROR" in app.log() and "streaming failed" in app.log()

    dirs["output"].unlink()
    again = start_app(*files_args(dirs))
    again.wait_for_log(r"Recovered streaming context")
    wait_for_totals(dirs["output"], truth(["one two two\n", "three three three\n"]), again)
    assert again.terminate() == 0


def put_file_in_place_of(directory: Path) -> None:
    """Replace a directory the running app may be writing into (a base's executors) by a file.

    An executor can create a sub-directory while it is being removed, so remove and retry until
    the file stands where the directory was.
    """
    deadline = time.monotonic() + 30
    while True:
        shutil.rmtree(directory, ignore_errors=True)
        try:
            with open(directory, "x") as blocker:
                blocker.write("in the way")
            return
        except (FileExistsError, IsADirectoryError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_an_unreadable_checkpoint_exits_3_with_what_to_do(
    dirs: dict[str, Path], start_app: Any
) -> None:
    app = start_app(*files_args(dirs))
    app.wait_for_log(r"Started new streaming context")
    drop_file(dirs["input"], "a.txt", b"one\n")
    wait_for_totals(dirs["output"], {"one": 1}, app)
    assert app.terminate() == 0
    checkpoints = list(dirs["checkpoint"].glob("checkpoint-*"))
    assert checkpoints
    for path in checkpoints:
        path.write_bytes(b"not a checkpoint")

    broken = start_app(*files_args(dirs))
    assert broken.wait(timeout=120) == 3
    errors = [line for line in broken.log().splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, broken.log()[-3000:]
    assert "cannot recover from checkpoint" in errors[0]
    assert "Move the directory aside" in errors[0]
    assert "Traceback" not in broken.log()
