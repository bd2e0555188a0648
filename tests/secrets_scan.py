"""Find secrets in what a run left behind, compressed files read decompressed.

Spark compresses what it writes with lz4-java's block stream (`LZ4BlockOutputStream`):
the DStream checkpoint's `checkpoint-*` and `*.bk` files (Java serialization inside, the
SparkConf among it), event logs, RDD checkpoints when `spark.checkpoint.compress` is on.
Their bytes show no secret as it was given, so each file is also read decoded: lz4-java
block streams, gzip, and zip archives (a py-files zip) by their first bytes, whatever
their name, and again inside what they hold. Snappy and zstd are not decoded. Inside,
Java serialization writes raw bytes (the pickled Python closures of a DStream graph) in
blocks of at most 1,024 bytes, each with a header: a secret that straddles two blocks is
found with the header in its middle too.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import lz4.block

# lz4-java's LZ4BlockOutputStream: each block is the magic, a token (the method in the high
# nibble, the compression level in the low one), the compressed and original lengths and
# an xxhash32 checksum (little-endian), then the block; an empty block ends a stream.
LZ4_MAGIC = b"LZ4Block"
_LZ4_HEADER = struct.Struct("<8sBiii")
_LZ4_RAW, _LZ4_COMPRESSED = 0x10, 0x20
GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
MAX_DEPTH = 3  # an archive in a compressed file in an archive is as deep as it goes
# Java serialization's block-data headers: TC_BLOCKDATA (0x77) and a length byte, or
# TC_BLOCKDATALONG (0x7A) and a 4-byte length.
_BLOCK_HEADER = rb"(?:\x77.|\x7a....)"


class UndecodableError(ValueError):
    """A file starts as a compressed format does but cannot be decoded."""


def decode_lz4_blocks(data: bytes) -> bytes:
    """The content of an lz4-java block stream (one or more, one after the other)."""
    out = bytearray()
    pos = 0
    while pos < len(data):
        if len(data) - pos < _LZ4_HEADER.size:
            raise UndecodableError(f"truncated lz4-java block header at byte {pos}")
        magic, token, packed, original, _checksum = _LZ4_HEADER.unpack_from(data, pos)
        if magic != LZ4_MAGIC:
            raise UndecodableError(f"no lz4-java block at byte {pos}")
        pos += _LZ4_HEADER.size
        block = data[pos : pos + packed]
        if len(block) != packed:
            raise UndecodableError(f"truncated lz4-java block at byte {pos}")
        pos += packed
        method = token & 0xF0
        if method == _LZ4_RAW:
            out += block
        elif method == _LZ4_COMPRESSED:
            try:
                out += lz4.block.decompress(block, uncompressed_size=original)
            except lz4.block.LZ4BlockError as exc:
                raise UndecodableError(f"lz4-java block at byte {pos - packed}: {exc}") from None
        else:
            raise UndecodableError(f"unknown lz4-java block method {method:#x} at byte {pos}")
    return bytes(out)


def _layers(data: bytes, label: str, depth: int = 0) -> Iterator[tuple[str, bytes]]:
    """(what it is, bytes): the data itself, then what it decodes to, recursively."""
    yield label, data
    if depth >= MAX_DEPTH:
        return
    if data.startswith(LZ4_MAGIC):
        yield from _layers(decode_lz4_blocks(data), f"{label} (lz4-java decoded)", depth + 1)
    elif data.startswith(GZIP_MAGIC):
        try:
            inner = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise UndecodableError(f"gzip: {exc}") from None
        yield from _layers(inner, f"{label} (gunzipped)", depth + 1)
    elif data.startswith(ZIP_MAGIC):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for name in archive.namelist():
                    inner = archive.read(name)
                    yield from _layers(inner, f"{label} [{name}]", depth + 1)
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise UndecodableError(f"zip: {exc}") from None


def _files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            for root, _dirs, names in os.walk(path):  # symlinked directories not followed
                for name in sorted(names):
                    yield Path(root, name)


def secret_pattern(secret: str) -> re.Pattern[bytes]:
    """The secret's UTF-8 bytes, whole or with a Java block-data header after any byte."""
    raw = secret.encode("utf-8")
    split = [re.escape(raw[:k]) + _BLOCK_HEADER + re.escape(raw[k:]) for k in range(1, len(raw))]
    return re.compile(b"|".join([re.escape(raw), *split]), re.DOTALL)


def find_secrets(paths: Iterable[Path], secrets: Iterable[str]) -> list[str]:
    """Where any secret occurs in the files under `paths` (files or directories), read as
    they are and decoded; one line per finding, naming the file, the layer and the secret by
    its position in `secrets` (never the secret itself). A file that looks compressed but
    cannot be decoded is a finding too: its content was not searched. Empty: none found."""
    wanted = [(number, secret_pattern(s)) for number, s in enumerate(secrets, 1) if s]
    found: list[str] = []
    for path in _files(paths):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            for label, data in _layers(path.read_bytes(), str(path)):
                found += [f"{label}: secret #{n}" for n, secret in wanted if secret.search(data)]
        except UndecodableError as exc:
            found.append(f"{path}: not searched, cannot decode it ({exc})")
    return found
