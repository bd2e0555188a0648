"""`checkpoint scrub`: the secret's value overwritten in a Java serialization stream, in place."""

from __future__ import annotations

import os
import re
import signal
import stat
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from streaming_app.errors import CheckpointError
from streaming_app.tools.checkpoint_clean import _TEMP as _CLEAN_TEMP
from streaming_app.tools.secret_scrub import TEMP_NAME, Codec, scrub_checkpoint, scrub_serialized
from tests.integration.harness import wait_for


def _string(text: str) -> bytes:
    """A Java serialization TC_STRING."""
    raw = text.encode()
    return b"\x74" + struct.pack(">H", len(raw)) + raw


def _pairs(*pairs: tuple[str, str]) -> bytes:
    """Settings as Spark serializes Tuple2s: a class descriptor, then the two strings each."""
    body = b"".join(b"\x73\x71\x00\x7e\x00\x05" + _string(k) + _string(v) for k, v in pairs)
    return b"\xac\xed\x00\x05prefix" + body + b"suffix"


def test_the_secrets_value_is_overwritten_and_nothing_else_moves() -> None:
    data = _pairs(("spark.app.name", "x"), ("spark.authenticate.secret", "s3cr3t"), ("a", "b"))
    scrubbed, found = scrub_serialized(data)
    assert found == 1
    assert len(scrubbed) == len(data)
    assert b"s3cr3t" not in scrubbed
    assert scrubbed == data.replace(b"s3cr3t", b"******")


def test_a_scrubbed_stream_and_one_without_a_secret_are_left_alone() -> None:
    scrubbed, _ = scrub_serialized(_pairs(("spark.authenticate.secret", "s3cr3t")))
    assert scrub_serialized(scrubbed) == (scrubbed, 0)
    plain = _pairs(("spark.authenticate", "true"))
    assert scrub_serialized(plain) == (plain, 0)
    # A back-reference (0x71) where the value would be: not a string to overwrite.
    ref = b"prefix" + _string("spark.authenticate.secret") + b"\x71\x00\x7e\x00\x09"
    assert scrub_serialized(ref) == (ref, 0)
    assert scrub_serialized(_string("spark.authenticate.secret")) == (
        _string("spark.authenticate.secret"),
        0,
    )


def _identity_codec(readable: bool = True) -> Codec:
    return Codec(lambda b: b, lambda b: b, lambda _: readable)


def test_scrub_checkpoint_rewrites_spark_files_only_and_names_them(tmp_path: Path) -> None:
    secret = _pairs(("spark.authenticate.secret", "s3cr3t"))
    for name in ("checkpoint-1000", "checkpoint-1000.bk", "unusable-ckpt-500", "metadata"):
        (tmp_path / name).write_bytes(secret)
    (tmp_path / "checkpoint-2000").write_bytes(_pairs(("spark.authenticate", "true")))
    (tmp_path / ".checkpoint-1000.crc").write_bytes(b"crc")  # Hadoop's, stale once rewritten
    (tmp_path / ".checkpoint-2000.crc").write_bytes(b"crc")
    names = scrub_checkpoint(str(tmp_path), _identity_codec())
    assert names == ["checkpoint-1000", "checkpoint-1000.bk", "unusable-ckpt-500"]
    for name in names:
        assert b"s3cr3t" not in (tmp_path / name).read_bytes()
    assert (tmp_path / "metadata").read_bytes() == secret  # not Spark's: not touched
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [
        ".checkpoint-2000.crc"
    ]


def test_a_file_spark_could_not_read_once_scrubbed_is_left_unchanged(tmp_path: Path) -> None:
    secret = _pairs(("spark.authenticate.secret", "s3cr3t"))
    (tmp_path / "checkpoint-1000").write_bytes(secret)
    codec = Codec(lambda b: b, lambda b: b, lambda p: not p.endswith(".tmp"))
    with pytest.raises(CheckpointError, match="left unchanged"):
        scrub_checkpoint(str(tmp_path), codec)
    assert (tmp_path / "checkpoint-1000").read_bytes() == secret
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-1000"]


# Spark's Checkpoint.REGEX, as its listing applies it (findFirstIn: anywhere in the name).
SPARK_LISTS = re.compile(r"checkpoint-([\d]+)([\w\.]*)")


def _hadoop_checksum(name: str) -> bool:
    """Hadoop's checksum beside a file, which its local file system leaves out of listings."""
    return name.startswith(".") and name.endswith(".crc")


def test_the_listing_probe_finds_the_temporary_name_that_broke_recovery() -> None:
    # The probe's positive control: scrub's earlier temporary name, `.<file>.scrub-<pid>.tmp`,
    # is kept by Spark's listing and then fails its full match (scala.MatchError).
    old = ".checkpoint-1000.scrub-4242.tmp"
    assert SPARK_LISTS.search(old) and not SPARK_LISTS.fullmatch(old)
    assert not _hadoop_checksum(old)


# Runs scrub on argv[1] with the identity codec and SIGKILLs itself at step argv[2]: the
# temporary file written and synced, the stale checksum removed, the first rename done.
_KILLED_AT = """
import os, signal, sys
from streaming_app.tools import secret_scrub
from streaming_app.tools.secret_scrub import Codec, scrub_checkpoint

step = sys.argv[2]
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
real_fsync, real_unlink, real_replace = os.fsync, os.unlink, os.replace
def fsync(fd):
    real_fsync(fd)
    if step == "written":
        die()
def unlink(path):
    real_unlink(path)
    if step == "checksum-removed" and path.endswith(".crc"):
        die()
def replace(src, dst):
    real_replace(src, dst)
    if step == "renamed":
        die()
os.fsync, os.unlink, os.replace = fsync, unlink, replace
scrub_checkpoint(sys.argv[1], Codec(lambda b: b, lambda b: b, lambda _: True))
"""


@pytest.mark.parametrize("step", ["written", "checksum-removed", "renamed"])
def test_a_scrub_killed_at_any_step_leaves_whole_files_and_nothing_spark_lists(
    tmp_path: Path, step: str
) -> None:
    secret = _pairs(("spark.authenticate.secret", "s3cr3t"))
    scrubbed = _pairs(("spark.authenticate.secret", "******"))
    for name in ("checkpoint-1000", "checkpoint-2000"):
        (tmp_path / name).write_bytes(secret)
        (tmp_path / f".{name}.crc").write_bytes(b"crc")
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_AT, str(tmp_path), step], capture_output=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    for name in ("checkpoint-1000", "checkpoint-2000"):
        assert (tmp_path / name).read_bytes() in (secret, scrubbed)  # whole, old or new
    if step == "renamed":
        assert (tmp_path / "checkpoint-1000").read_bytes() == scrubbed
    # What the kill left, of all Hadoop's local file system lists (it hides its `.*.crc`):
    # Spark's listing matches no leftover anywhere in its name; `checkpoint clean` takes it.
    leftovers = [
        p.name
        for p in tmp_path.iterdir()
        if p.name not in ("checkpoint-1000", "checkpoint-2000") and not _hadoop_checksum(p.name)
    ]
    if step == "written":
        assert leftovers, "the kill after the write left no temporary file to check"
    kept = [name for name in leftovers if SPARK_LISTS.search(name)]
    assert not kept, f"Spark's checkpoint listing keeps the leftovers {kept}"
    assert all(_CLEAN_TEMP.match(name) for name in leftovers), leftovers
    # Run again, it finishes the job.
    assert scrub_checkpoint(str(tmp_path), _identity_codec())
    for name in ("checkpoint-1000", "checkpoint-2000"):
        assert (tmp_path / name).read_bytes() == scrubbed


def _run_holding(directory: Path) -> subprocess.Popen[str]:
    """A process that holds `directory` as a run does (hold_for_run), once it said so."""
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import sys, time; from streaming_app.recovery.checkpoint_lock import hold_for_run;"
            "hold_for_run(sys.argv[1]); print('held', flush=True); time.sleep(600)",
            str(directory),
        ],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_scrub_refuses_while_a_run_holds_the_checkpoint_and_goes_on_once_it_died(
    tmp_path: Path,
) -> None:
    (tmp_path / "checkpoint-1000").write_bytes(_pairs(("spark.authenticate.secret", "s3")))
    holder = _run_holding(tmp_path)
    try:
        with pytest.raises(CheckpointError, match="an app is running on this checkpoint"):
            scrub_checkpoint(str(tmp_path), _identity_codec())
        assert b"s3" in (tmp_path / "checkpoint-1000").read_bytes()
    finally:
        holder.kill()  # as kill -9 would: the kernel drops its lock
        holder.wait(timeout=30)
    assert scrub_checkpoint(str(tmp_path), _identity_codec()) == ["checkpoint-1000"]


def test_a_run_waits_while_scrub_holds_the_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from streaming_app.recovery import checkpoint_lock

    held: list[bool] = []
    with checkpoint_lock.held_alone(str(tmp_path)):
        waiter = threading.Thread(
            target=lambda: held.append(checkpoint_lock.hold_for_run(str(tmp_path), 0.05) is None)
        )
        waiter.start()
        waiting = "waiting for `checkpoint scrub` to finish"
        wait_for("the run to wait for the lock", lambda: waiting in caplog.text, 10, pause=0.01)
        assert held == []  # still waiting
    waiter.join(timeout=10)
    assert held == [True]
    os.close(checkpoint_lock._HELD.pop())


def test_a_runs_own_placeholder_is_no_secret_and_is_left_alone() -> None:
    from streaming_app.lifecycle.spark_secret import PLACEHOLDER

    stream = _pairs(("spark.authenticate.secret", PLACEHOLDER))
    assert scrub_serialized(stream) == (stream, 0)
    # Its positive control: a real secret of the same length is scrubbed.
    real = _pairs(("spark.authenticate.secret", "x" * len(PLACEHOLDER)))
    assert scrub_serialized(real)[1] == 1


def test_the_scrubbed_file_keeps_the_originals_mode_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint-1000"
    path.write_bytes(_pairs(("spark.authenticate.secret", "s3")))
    path.chmod(0o644)
    old = os.umask(0o077)
    try:
        assert scrub_checkpoint(str(tmp_path), _identity_codec()) == ["checkpoint-1000"]
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert b"s3" not in path.read_bytes()


def test_scrub_writes_through_no_link_it_did_not_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link planted at the temporary file's name (here made predictable) or in place of a
    checkpoint file: scrub neither writes through it nor rewrites what it names."""
    from streaming_app.tools import secret_scrub

    victim = tmp_path / "victim"
    victim.write_bytes(b"not scrub's to write")
    monkeypatch.setattr(secret_scrub.secrets, "token_hex", lambda n: "planted")
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "checkpoint-1000").write_bytes(_pairs(("spark.authenticate.secret", "s3")))
    planted = checkpoint / TEMP_NAME.format(pid=os.getpid(), token="planted")
    planted.symlink_to(victim)
    with pytest.raises(CheckpointError, match="is there already"):
        scrub_checkpoint(str(checkpoint), _identity_codec())
    assert victim.read_bytes() == b"not scrub's to write"
    planted.unlink()
    # A checkpoint file's name that is a link to a file elsewhere: left, and its target too.
    (checkpoint / "checkpoint-2000").symlink_to(victim)
    victim.write_bytes(_pairs(("spark.authenticate.secret", "s3")))
    assert scrub_checkpoint(str(checkpoint), _identity_codec()) == ["checkpoint-1000"]
    assert b"s3" in victim.read_bytes()


def test_a_first_run_holds_its_checkpoint_before_it_exists_so_scrub_refuses(
    tmp_path: Path,
) -> None:
    """A first run: the directory is not there yet when the run starts. The run makes it
    and holds the lock from then on; a scrub started before Spark's first checkpoint is
    refused, and nothing is written."""
    directory = tmp_path / "new-checkpoint"
    holder = _run_holding(directory)
    try:
        assert directory.is_dir()
        with pytest.raises(CheckpointError, match="an app is running on this checkpoint"):
            scrub_checkpoint(str(directory), _identity_codec())
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert list(directory.iterdir()) == []
