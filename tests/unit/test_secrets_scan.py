"""The tests' secret search: plain files, lz4-java block streams, gzip and zip, nested."""

from __future__ import annotations

import gzip
import io
import struct
import zipfile
from pathlib import Path

import lz4.block
import pytest

from tests.secrets_scan import LZ4_MAGIC, UndecodableError, decode_lz4_blocks, find_secrets

SECRET = "pw-4f1d9a"


def lz4_java(data: bytes, block_size: int = 64) -> bytes:
    """`data` as lz4-java's LZ4BlockOutputStream writes it: compressed blocks (raw where
    compressing does not pay), then the empty block that ends the stream. Small blocks
    split every word: only the decoded stream holds them whole."""
    out = bytearray()
    for start in range(0, len(data), block_size):
        chunk = data[start : start + block_size]
        packed = lz4.block.compress(chunk, store_size=False)
        token, body = (0x20, packed) if len(packed) < len(chunk) else (0x10, chunk)
        out += struct.pack("<8sBiii", LZ4_MAGIC, token | 4, len(body), len(chunk), 0) + body
    return bytes(out + struct.pack("<8sBiii", LZ4_MAGIC, 0x10 | 4, 0, 0, 0))


def test_lz4_java_streams_decode_to_what_was_written() -> None:
    data = b"spark.authenticate.secret " * 40 + bytes(range(256))
    assert decode_lz4_blocks(lz4_java(data)) == data
    assert decode_lz4_blocks(lz4_java(b"a") + lz4_java(b"b")) == b"ab"  # streams appended


def test_secrets_are_found_in_every_layer_and_named_by_position(tmp_path: Path) -> None:
    text = f"spark.authenticate.secret={SECRET}\n".encode() * 5
    (tmp_path / "plain.log").write_bytes(text)
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "checkpoint-1000").write_bytes(lz4_java(text, 4))
    (tmp_path / "deep" / "checkpoint-1000.bk").write_bytes(gzip.compress(lz4_java(text, 4)))
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("conf/app.ini", text)
    (tmp_path / "pyfiles.zip").write_bytes(archive.getvalue())
    (tmp_path / "clean.txt").write_bytes(lz4_java(b"nothing here" * 20))

    found = find_secrets([tmp_path], ["other", SECRET])
    assert sorted(found) == sorted(
        [
            f"{tmp_path}/plain.log: secret #2",
            f"{tmp_path}/deep/checkpoint-1000 (lz4-java decoded): secret #2",
            f"{tmp_path}/deep/checkpoint-1000.bk (gunzipped) (lz4-java decoded): secret #2",
            f"{tmp_path}/pyfiles.zip [conf/app.ini]: secret #2",
        ]
    )
    assert not any(SECRET in line for line in found)
    assert find_secrets([tmp_path / "clean.txt", tmp_path / "missing"], [SECRET]) == []


def test_a_file_that_cannot_be_decoded_is_reported(tmp_path: Path) -> None:
    broken = tmp_path / "checkpoint-2000"
    broken.write_bytes(lz4_java(SECRET.encode() * 30, 4)[:-30])
    with pytest.raises(UndecodableError):
        decode_lz4_blocks(broken.read_bytes())
    [line] = find_secrets([tmp_path], [SECRET])
    assert line.startswith(f"{broken}: not searched, cannot decode it")


def test_a_secret_split_by_a_java_block_data_header_is_found(tmp_path: Path) -> None:
    raw = SECRET.encode()
    short = b"\xac\xed\x00\x05" + raw[:3] + b"\x77\x10" + raw[3:]
    long = b"\xac\xed\x00\x05" + raw[:5] + b"\x7a\x00\x00\x04\x00" + raw[5:]
    (tmp_path / "checkpoint-3000").write_bytes(lz4_java(short, 4))
    (tmp_path / "checkpoint-4000").write_bytes(lz4_java(long, 4))
    (tmp_path / "other").write_bytes(raw[:3] + b"\x01\x10" + raw[3:])  # no header: no secret
    assert sorted(find_secrets([tmp_path], [SECRET])) == [
        f"{tmp_path}/checkpoint-3000 (lz4-java decoded): secret #1",
        f"{tmp_path}/checkpoint-4000 (lz4-java decoded): secret #1",
    ]
