"""Search what a run left for secrets, decompressed: Spark's LZ4 streams and zip archives.

Spark writes the DStream checkpoint (`checkpoint-*`, `*.bk`) through its compression
codec, LZ4 by default: lz4-java's block stream (`LZ4Block` magic, then per block a token,
compressed and original lengths and a checksum). Inside is Java serialization holding
the pickled Python closures as raw bytes, so a password that a closure captured shows as
plain UTF-8 once the blocks are decompressed (or split by a block-data header of Java
serialization, which the search allows for). RocksDB state uploads are zip archives.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

LZ4_MAGIC = b"LZ4Block"
_HEADER = struct.Struct("<8sBiii")  # magic, token, compressed, original, checksum
_RAW, _LZ4 = 0x10, 0x20


def lz4_raw_block(src: bytes, size: int) -> bytes:
    """Decompress one LZ4 block (the raw format, no frame) of `size` bytes."""
    out = bytearray()
    i = 0
    while i < len(src):
        token = src[i]
        i += 1
        literals = token >> 4
        if literals == 15:
            while True:
                extra = src[i]
                i += 1
                literals += extra
                if extra != 255:
                    break
        out += src[i : i + literals]
        i += literals
        if i >= len(src):
            break  # the last sequence has literals only
        offset = src[i] | (src[i + 1] << 8)
        i += 2
        length = token & 0x0F
        if length == 15:
            while True:
                extra = src[i]
                i += 1
                length += extra
                if extra != 255:
                    break
        length += 4
        start = len(out) - offset
        if offset >= length:
            out += out[start : start + length]
        else:  # an overlapping match repeats the last `offset` bytes
            for k in range(length):
                out.append(out[start + k])
    assert len(out) == size, f"LZ4 block gave {len(out)} bytes, its header says {size}"
    return bytes(out)


def lz4_block_stream(data: bytes, at: int = 0) -> bytes:
    """The bytes of an lz4-java LZ4BlockOutputStream starting at `at`."""
    out = bytearray()
    pos = at
    while pos + _HEADER.size <= len(data) and data[pos : pos + 8] == LZ4_MAGIC:
        _, token, compressed, original, _ = _HEADER.unpack_from(data, pos)
        pos += _HEADER.size
        block = data[pos : pos + compressed]
        pos += compressed
        method = token & 0xF0
        if method == _RAW:
            out += block
        elif method == _LZ4:
            out += lz4_raw_block(block, original)
        else:
            raise AssertionError(f"unknown LZ4Block method {method:#x} at {pos}")
    return bytes(out)


def readable_forms(data: bytes) -> Iterator[bytes]:
    """The bytes as stored, and decompressed wherever they hold an LZ4 stream or a zip."""
    yield data
    at = data.find(LZ4_MAGIC)
    if at >= 0:
        yield from readable_forms(lz4_block_stream(data, at))
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for name in archive.namelist():
                yield from readable_forms(archive.read(name))


# Java serialization writes raw bytes (the pickles) in blocks of up to 1,024 bytes, each
# with a header (TC_BLOCKDATA 0x77 and a length byte, or TC_BLOCKDATALONG 0x7A and four):
# a string that straddles two blocks has a header in its middle.
_BLOCK_HEADER = rb"(?:\x77.|\x7a....)"


def _pattern(needle: bytes) -> re.Pattern[bytes]:
    splits = [re.escape(needle[:k]) + _BLOCK_HEADER + re.escape(needle[k:])
              for k in range(1, len(needle))]  # fmt: skip
    return re.compile(b"|".join([re.escape(needle), *splits]), re.DOTALL)


def files_holding(root: Path, needles: Iterable[str]) -> dict[str, list[str]]:
    """{needle: files under root that hold it, stored or decompressed}."""
    wanted = {n: _pattern(n.encode("utf-8")) for n in needles}
    found: dict[str, list[str]] = {n: [] for n in wanted}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        forms = list(readable_forms(path.read_bytes()))
        for needle, pattern in wanted.items():
            if any(pattern.search(form) for form in forms):
                found[needle].append(str(path.relative_to(root)))
    return found
