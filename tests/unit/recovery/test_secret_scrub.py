"""`checkpoint scrub`: the secret's value overwritten in a Java serialization stream, in place."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from streaming_app.errors import CheckpointError
from streaming_app.recovery.secret_scrub import Codec, scrub_checkpoint, scrub_serialized


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
