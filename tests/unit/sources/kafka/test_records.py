"""The lean record decoding against kafka-python's own, on record batches built here."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from streaming_app.sources.kafka.records import LeanPartitionRecords, batch_records, make_lean

TP = TopicPartition("t", 0)
NONE, GZIP = 0, 1


def built(
    magic: int,
    offset: int,
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
    compression: int = NONE,
    gaps: int = 0,
    timestamps: list[int] | None = None,
) -> bytes:
    """One record batch: (key, value, headers) records from `offset`, `gaps` skipped
    between consecutive records (as compaction leaves them)."""
    builder = MemoryRecordsBuilder(magic, compression, batch_size=1 << 24, offset=offset)
    for i, (key, value, headers) in enumerate(records):
        if i and gaps:
            builder.skip(gaps)
        ts = timestamps[i] if timestamps else 1_700_000_000_000 + i
        builder.append(ts, key, value, headers if magic == 2 else None)
    builder.close()
    return bytes(builder.records()._buffer)


def as_control(batch: bytes) -> bytes:
    """The same v2 batch marked as a control batch (a transaction marker), CRC redone."""
    data = bytearray(batch)
    at = DefaultRecordBatch.ATTRIBUTES_OFFSET
    (attributes,) = struct.unpack_from(">h", data, at)
    struct.pack_into(">h", data, at, attributes | DefaultRecordBatch.CONTROL_MASK)
    struct.pack_into(">I", data, DefaultRecordBatch.CRC_OFFSET, calc_crc32c(memoryview(data)[at:]))
    return bytes(data)


def both(data: bytes, fetch_offset: int = 0, take: int | None = None) -> list[Any]:
    """What kafka-python's PartitionRecords and the lean one return, and where each ends."""
    results = []
    for cls in (Fetcher.PartitionRecords, LeanPartitionRecords):
        part = cls(fetch_offset, TP, MemoryRecords(data))
        taken = part.take(take)
        pairs = [(r.offset, r.value) if isinstance(r, ConsumerRecord) else r for r in taken]
        results.append((pairs, part.next_fetch_offset))
    return results


VARIED = [
    (None, b"plain line", []),
    (b"key", b"", []),
    (b"k" * 200, None, [("h", b"v"), ("other", b"x" * 300)]),
    (None, "caf\u00e9 \u6f22\u5b57".encode(), []),
    (None, b"y" * 70, []),  # a 2-byte varint length
    (b"", b"z" * 20_000, [("big", b"w" * 9000)]),  # 3-byte varint lengths
]


def test_varied_records_decode_as_kafka_python_does() -> None:
    data = built(2, 5, VARIED, timestamps=[0, -5, 10**12, 1, 2**40, -(2**35)])
    kafka_python, lean = both(data)
    assert lean == kafka_python
    assert [offset for offset, _ in lean[0]] == list(range(5, 11))


def test_gzip_gaps_control_and_legacy_batches() -> None:
    lines = [(None, f"line {i}".encode(), []) for i in range(300)]
    data = (
        built(2, 0, lines[:100])
        + built(2, 100, lines[:50], compression=GZIP, gaps=2)  # offsets 100, 103, ..., 247
        + as_control(built(2, 248, lines[:1]))
        + built(2, 249, lines[100:300], compression=GZIP)
        + built(1, 449, lines[:3])
        + built(0, 452, lines[:2], compression=GZIP)
    )
    kafka_python, lean = both(data)
    assert lean == kafka_python
    offsets = [offset for offset, _ in lean[0]]
    assert 248 not in offsets and offsets[100:103] == [100, 103, 106]
    assert len(offsets) == 355 and lean[1] == 454


def test_a_fetch_from_inside_a_batch_and_a_partial_take() -> None:
    data = built(2, 0, [(None, str(i).encode(), []) for i in range(50)], compression=GZIP)
    kafka_python, lean = both(data, fetch_offset=20, take=7)
    assert lean == kafka_python
    assert lean == ([(i, str(i).encode()) for i in range(20, 27)], 27)


def test_a_batch_cut_short_by_the_fetch_size_is_left_for_the_next_fetch() -> None:
    first = built(2, 0, [(None, b"a", [])] * 3)
    data = first + built(2, 3, [(None, b"b", [])] * 3)[:-10]
    kafka_python, lean = both(data)
    assert lean == kafka_python == ([(0, b"a"), (1, b"a"), (2, b"a")], 3)


def test_a_corrupt_batch_fails_both_ways() -> None:
    data = bytearray(built(2, 0, [(None, b"some line", [])]))
    data[-3] ^= 0xFF
    for cls in (Fetcher.PartitionRecords, LeanPartitionRecords):
        with pytest.raises(CorruptRecordError):
            cls(0, TP, MemoryRecords(bytes(data))).take()


def test_batch_records_refuses_lengths_that_do_not_add_up() -> None:
    data = built(2, 0, [(None, b"abc", [])])
    header = DefaultRecordBatch.HEADER_STRUCT.size
    assert batch_records(data, header, 1, 0) == [(0, b"abc")]
    with pytest.raises(CorruptRecordError):
        batch_records(data + b"\x00", header, 1, 0)  # a byte after the last record
    with pytest.raises(CorruptRecordError):
        batch_records(data[:-2], header, 1, 0)  # the record runs past the batch


def test_make_lean_swaps_the_fetchers_records_and_refuses_read_committed() -> None:
    consumer = SimpleNamespace(
        config={"isolation_level": "read_uncommitted"}, _fetcher=SimpleNamespace()
    )
    assert make_lean(consumer)._fetcher.PartitionRecords is LeanPartitionRecords
    committed = SimpleNamespace(
        config={"isolation_level": "read_committed"}, _fetcher=SimpleNamespace()
    )
    with pytest.raises(ValueError, match="uncommitted"):
        make_lean(committed)
