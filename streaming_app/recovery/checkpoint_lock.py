"""A lock on a local DStream checkpoint directory: runs share it, `checkpoint scrub` holds it alone.

Scrub rewrites the checkpoint's files and must not race a run that writes new ones.

Driver side. The lock is `flock(2)` on the directory itself (no file of its own in it):
the kernel drops it when the process that holds it ends, however it ends (kill -9 too),
so a crashed run or scrub leaves no stale lock behind. A directory on HDFS or an object
store has no such lock; `checkpoint scrub` works on local directories only.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from streaming_app.common.fs import local_path
from streaming_app.errors import CheckpointError

log = logging.getLogger(__name__)

# The runs' shared locks: held (open) until the process ends.
_HELD: list[int] = []


def _open(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def hold_for_run(checkpoint_dir: str, poll: float = 0.5) -> None:
    """Hold the directory's shared lock until this process ends, waiting while a
    `checkpoint scrub` holds it. A local directory not there yet (a first run) is made
    first, so that no scrub can take it between the run's start and Spark's first
    checkpoint. Nothing for a directory that is not local (no lock there)."""
    path = local_path(checkpoint_dir)
    if path is None:
        return
    os.makedirs(path, exist_ok=True)
    fd = _open(path)
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if not said:
                log.warning("checkpoint_dir %s: waiting for `checkpoint scrub` to finish", path)
                said = True
            time.sleep(poll)
    _HELD.append(fd)


@contextmanager
def held_alone(path: str) -> Iterator[None]:
    """Hold the directory's lock exclusively for an offline tool (CheckpointError, exit 3,
    while a run holds it)."""
    fd = _open(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CheckpointError(
                f"{path}: an app is running on this checkpoint (it holds the directory's "
                "lock); stop it first"
            ) from None
        yield
    finally:
        os.close(fd)
