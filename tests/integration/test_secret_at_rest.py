"""No secret at rest: a checkpoint that an earlier commit wrote with the cluster's secret in it
is said in one line at start, then scrubbed with `checkpoint scrub`, and no total is lost.
A scrub killed midway leaves a checkpoint that recovers exactly (its leftover under scrub's
earlier temporary name makes that recovery fail), and scrub refuses a checkpoint a run
holds. (Each step a scrub can be killed at, file by file: tests/unit/tools/test_secret_scrub.py.)

Commit 897783b is the last that let Spark write `spark.authenticate.secret` into the DStream
checkpoint; its package is extracted from this repository, as the upgrade tests do.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.checkpoint_files import CHECKPOINT_FILE, checkpoint_file_times
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for, wait_for_totals
from tests.integration.test_upgrade_from_releases import extract_release, start_release
from tests.secrets_scan import find_secrets

pytestmark = pytest.mark.timeout(420)

PREVIOUS = "897783b"  # the last commit whose checkpoints hold the secret
SAID = "holds the cluster's secret (spark.authenticate.secret)"
# `checkpoint scrub` of argv[1], SIGKILLed at its first fsync (a file's replacement written).
KILLED_AFTER_WRITE = """
import os, signal, sys
real = os.fsync
def fsync(fd):
    real(fd)
    os.kill(os.getpid(), signal.SIGKILL)
os.fsync = fsync
from streaming_app.cli.checkpoint import checkpoint
checkpoint(["scrub", sys.argv[1]])
"""


def scrub_cli(checkpoint: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming_app", "checkpoint", "scrub", str(checkpoint)],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_checkpoint_holding_the_secret_is_said_then_scrubbed_with_every_total_kept(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = extract_release(tmp_path / "release", f"commit {PREVIOUS}", PREVIOUS)
    secret = f"old-{secrets.token_hex(16)}"
    rng = random.Random(39)
    texts: list[str] = []

    def add(name: str) -> None:
        texts.append(make_text(rng, 30))
        drop_file(dirs["input"], name, texts[-1].encode())

    args = files_args(dirs, "--spark-conf", "spark.authenticate=true")
    old = start_release(
        monkeypatch,
        start_app,
        package,
        *args,
        "--spark-conf",
        f"spark.authenticate.secret={secret}",
    )
    old.wait_for_log(r"Started new streaming context")
    add("a.txt")
    wait_for_totals(dirs["output"], truth(texts), old)
    assert old.terminate() == 0, old.log()[-3000:]
    # The control: that commit did write the secret into the checkpoint.
    assert find_secrets([dirs["checkpoint"]], [secret]), "no secret in the older checkpoint"

    # The new version says so at start; killed at once, before its own checkpoint files
    # have replaced the older ones (Spark keeps the newest ten).
    warned = start_app(*args)
    warned.wait_for_log(re.escape(SAID))
    warned.kill9()
    said = [line for line in warned.log().splitlines() if SAID in line]
    assert len(said) == 1, warned.log()[-3000:]
    assert f"streaming-app checkpoint scrub {dirs['checkpoint']}" in said[0]
    assert secret not in warned.log()

    # A scrub killed once its first file's replacement is written and synced, before the
    # rename: the checkpoint still recovers (the leftover is not Spark's to list), and,
    # scrubbed after, exactly (the last run below).
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_WRITE, str(dirs["checkpoint"])],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    (leftover,) = [p for p in dirs["checkpoint"].iterdir() if p.name.endswith(".tmp")]
    # The positive control: the same leftover under scrub's earlier temporary name,
    # `.<file>.scrub-<pid>.tmp`, makes the same recovery fail (Spark's listing keeps the name,
    # then its full match throws scala.MatchError).
    newest = max(p.name for p in dirs["checkpoint"].iterdir() if CHECKPOINT_FILE.match(p.name))
    old_name = leftover.rename(leftover.with_name(f".{newest}.scrub-4242.tmp"))
    broken = start_app(*args)
    assert broken.wait(timeout=180) != 0, broken.log()[-3000:]
    assert "MatchError" in broken.log(), broken.log()[-3000:]
    old_name.rename(leftover)
    after_kill = start_app(*args)
    after_kill.wait_for_log(r"Recovered streaming context from checkpoint")
    # While a run holds the checkpoint, scrub refuses it: one line, exit 3, nothing changed.
    refused = scrub_cli(dirs["checkpoint"])
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "an app is running on this checkpoint" in refused.stderr
    # Killed at once again: its own checkpoint files must not replace all the older ones
    # (Spark keeps the newest ten), or no file would be left to scrub.
    after_kill.kill9()
    add("b.txt")

    scrub = scrub_cli(dirs["checkpoint"])
    assert scrub.returncode == 0, scrub.stdout + scrub.stderr
    assert scrub.stdout.startswith("removed the secret from "), scrub.stdout
    assert "Traceback" not in scrub.stderr
    assert find_secrets([dirs["checkpoint"], dirs["output"]], [secret]) == []

    clean = start_app(*args)
    clean.wait_for_log(r"Recovered streaming context from checkpoint")
    add("c.txt")
    wait_for_totals(dirs["output"], truth(texts), clean)
    assert clean.terminate() == 0, clean.log()[-3000:]
    assert SAID not in clean.log()
    assert "Creating new context" not in clean.log()
    assert find_secrets([dirs["checkpoint"], dirs["output"], tmp_path / "run3.log"], [secret]) == []


def untouched_unless_newest(checkpoint: Path, written: dict[str, int]) -> list[str]:
    """The checkpoint files seen with the mtimes in `written` that changed since, other than
    the newest batch time's. Spark writes only under its newest time (a batch's file when it
    plans the batch, again when a batch completes, the earlier copy renamed NAME.bk), so the
    newest time's two files may be rewritten any number of times; an older file is never
    written again, only deleted (Spark keeps the newest ten)."""
    newest = max(checkpoint_file_times(written))
    return [
        name
        for name, mtime in written.items()
        if checkpoint_file_times([name]) != [newest]
        and (checkpoint / name).exists()
        and (checkpoint / name).stat().st_mtime_ns != mtime
    ]


def test_scrub_is_refused_while_a_first_run_holds_its_new_checkpoint(
    dirs: dict[str, Path], start_app: Any
) -> None:
    """A first run on a checkpoint directory that did not exist, authentication on: a
    scrub started while it runs is refused in one line (exit 3) and rewrites nothing; once
    it stopped, scrub finds no secret in what the run wrote. (A run's placeholder, which a
    cluster master's run writes, is no secret to scrub either: test_secret_scrub.py.)"""
    assert not dirs["checkpoint"].exists()
    args = files_args(dirs, "--spark-conf", "spark.authenticate=true")
    app = start_app(*args)
    app.wait_for_log(r"Started new streaming context")
    drop_file(dirs["input"], "a.txt", b"one two two\n")
    wait_for_totals(dirs["output"], {"one": 1, "two": 2}, app)
    # At least two batch times written, so that one file is past Spark's own rewrites.
    wait_for(
        "a second batch time's checkpoint file",
        lambda: len(set(checkpoint_file_times(os.listdir(dirs["checkpoint"])))) >= 2,
        app=app,
    )
    written = {p.name: p.stat().st_mtime_ns for p in dirs["checkpoint"].glob("checkpoint-*")}
    refused = scrub_cli(dirs["checkpoint"])
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "an app is running on this checkpoint" in refused.stderr
    assert not list(dirs["checkpoint"].glob(".streaming-app-scrub-*"))
    assert untouched_unless_newest(dirs["checkpoint"], written) == []
    assert app.terminate() == 0, app.log()[-3000:]
    assert list(dirs["checkpoint"].glob("checkpoint-*")), "no checkpoint file to scrub"
    done = scrub_cli(dirs["checkpoint"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"{dirs['checkpoint']}: no checkpoint file holds a secret\n"
