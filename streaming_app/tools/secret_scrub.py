"""`checkpoint scrub`: the cluster's secret taken out of DStream checkpoint files, state kept.

Spark writes the SparkConf into every checkpoint file (`checkpoint-<ms>`, `.bk`, and the
`unusable-ckpt-*` an earlier start set aside): a compressed Java serialization stream in
which each setting is a `Tuple2` of two strings. A string is `TC_STRING`, a two-byte
length and its bytes, so the secret's value can be overwritten in place with as many `*`:
the stream keeps its structure and everything else, and Spark still reads it. A value of
`*` only is what the app reads as "no secret here" (spark_secret.is_placeholder); a run's
own placeholder (PLACEHOLDER_PREFIX and a random part) is no secret either and is left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass

from streaming_app.common.checkpoint_files import CHECKPOINT_FILE
from streaming_app.common.fs import sync_directory
from streaming_app.errors import CheckpointError
from streaming_app.lifecycle.spark_secret import PLACEHOLDER_PREFIX, SECRET_KEY
from streaming_app.recovery.checkpoint_lock import held_alone

log = logging.getLogger(__name__)

_TC_STRING = 0x74
_KEY = bytes([_TC_STRING]) + struct.pack(">H", len(SECRET_KEY)) + SECRET_KEY.encode()
_PLACEHOLDER = PLACEHOLDER_PREFIX.encode()


def scrub_serialized(data: bytes) -> tuple[bytes, int]:
    """The stream with each secret value after the key overwritten by `*`; and how many."""
    out = bytearray(data)
    found, start = 0, 0
    while (at := data.find(_KEY, start)) >= 0:
        value = at + len(_KEY)
        start = value
        if value + 3 > len(data) or data[value] != _TC_STRING:
            continue  # a back-reference to a string seen before, or not a setting's key
        (length,) = struct.unpack(">H", data[value + 1 : value + 3])
        body = slice(value + 3, value + 3 + length)
        value_bytes = data[body]
        if set(value_bytes) != {ord("*")} and not value_bytes.startswith(_PLACEHOLDER):
            out[body] = b"*" * length
            found += 1
    return bytes(out), found


def is_spark_file(name: str) -> bool:
    """A checkpoint file of Spark's, in use or set aside (`unusable-ckpt-<ms>[.bk]`)."""
    return bool(CHECKPOINT_FILE.match(name)) or name.startswith("unusable-ckpt-")


@dataclass(frozen=True)
class Codec:
    """Spark's compression codec, through the JVM: bytes in, bytes out."""

    decompress: Callable[[bytes], bytes]
    compress: Callable[[bytes], bytes]
    readable: Callable[[str], bool]


# The file a scrub writes before renaming it over a checkpoint file: a name in which
# Spark's checkpoint listing finds no `checkpoint-<ms>` (a killed scrub's leftover would
# make Spark's recovery fail to sort the files), and that `checkpoint clean` removes; its
# random part is new each scrub, and it is created only if no such name exists.
TEMP_NAME = ".streaming-app-scrub-{pid}-{token}.tmp"


def scrub_checkpoint(directory: str, codec: Codec) -> list[str]:
    """Rewrite each checkpoint file in `directory` that holds the secret; return their names.

    Each file is written beside itself, synced, and renamed over it (atomic), and only
    after Spark has read the new file as well as the old one; the directory is synced
    after each rename. Killed at any point, the directory holds each file whole, old or
    new, and at most a temporary file Spark ignores. Refused while a run holds the
    directory (checkpoint_lock). Local directories only.
    """
    with held_alone(directory):
        return _scrub(directory, codec)


def _scrub(directory: str, codec: Codec) -> list[str]:
    scrubbed = []
    token = secrets.token_hex(8)
    temp = os.path.join(directory, TEMP_NAME.format(pid=os.getpid(), token=token))
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not is_spark_file(name):
            continue
        try:  # the file itself, not a link's target, and a regular file only
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue  # a link, or gone
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            continue
        with os.fdopen(fd, "rb") as handle:
            original = handle.read()
        data, found = scrub_serialized(codec.decompress(original))
        if not found:
            continue
        _write_new(temp, codec.compress(data), info)
        if codec.readable(path) and not codec.readable(temp):
            os.unlink(temp)
            raise CheckpointError(f"{path}: Spark cannot read it once scrubbed; left unchanged")
        # Hadoop's local file system keeps a checksum beside each file, which the new bytes
        # would fail; with none, Hadoop reads the file unchecked.
        crc = os.path.join(directory, f".{name}.crc")
        if os.path.exists(crc):
            os.unlink(crc)
        os.replace(temp, path)
        sync_directory(directory)
        log.info("scrubbed %s", path)
        scrubbed.append(name)
    return scrubbed


def _write_new(temp: str, data: bytes, like: os.stat_result) -> None:
    """Write `data` to `temp`, a name that must not exist (never through a link someone
    put there), with the mode and (as far as this user may) the owner of the file it
    replaces, synced to disk."""
    try:
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            stat.S_IMODE(like.st_mode),
        )
    except FileExistsError:
        raise CheckpointError(
            f"{temp}: is there already (a file or a link someone put there); scrub writes "
            "through no name it did not make: remove it, then scrub again"
        ) from None
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(fd, stat.S_IMODE(like.st_mode))  # the umask takes nothing off
        if (like.st_uid, like.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # not root: this user's it stays
                os.fchown(fd, like.st_uid, like.st_gid)
        handle.write(data)
        handle.flush()
        os.fsync(fd)
