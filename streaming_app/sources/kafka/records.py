"""Executor side of the Kafka source: a record batch's offsets and values, decoded lean.

kafka-python's consumer turns every record of a fetch into a `DefaultRecord` and then a
`ConsumerRecord` (timestamp, key, headers, sizes, deserializers), about 5 µs a record in
Python: the most of what an executor spends on a line. The reader needs each record's
offset and value only. `LeanPartitionRecords` takes the place of the consumer's own
`Fetcher.PartitionRecords` (`lean_consumer`), keeps the rest of its fetching (leaders,
retries, out-of-range errors, positions) and yields `(offset, value)` pairs: for each
record batch of message format v2 it checks the CRC and skips control batches as
kafka-python does, decompresses with kafka-python's codecs, then reads the records'
lengths and offset deltas with the varints inlined and slices the values. Older message
formats go through kafka-python's own record classes.

The consumer always reads uncommitted (kafka-python's default, which the reader keeps):
no aborted transaction is filtered, as before. Its internals are kafka-python 3's
(`setup.cfg` pins the major version); tests/unit/sources/test_kafka_records.py holds the
decoding equal to kafka-python's on batches it builds itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch

Record = tuple[int, bytes | None]

_CONTROL = DefaultRecordBatch.CONTROL_MASK


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos` of `buf`, and the position after it (any length)."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("a varint of more than 10 bytes in a record batch")


def batch_records(buf: bytes, pos: int, count: int, base_offset: int) -> list[Record]:
    """The `(offset, value)` of the `count` records from `pos` of an uncompressed v2 batch.

    A record is: length, attributes (1 byte), timestamp delta, offset delta, key length,
    key, value length, value, headers (all lengths zigzag varints). Most of them are one
    or two bytes long, so those cases are decoded inline; the headers are skipped by the
    record's length. The batch's CRC, checked before, covers every byte read here.
    """
    records: list[Record] = []
    append = records.append
    end = len(buf)
    for _ in range(count):
        byte = buf[pos]
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            pos += 1
        elif buf[pos + 1] < 0x80:
            length = (byte & 0x7F) | (buf[pos + 1] << 7)
            length = (length >> 1) ^ -(length & 1)
            pos += 2
        else:
            length, pos = _varint(buf, pos)
        record_end = pos + length
        if length < 6 or record_end > end:
            raise CorruptRecordError(f"a record of {length} bytes in a batch of {end}")
        p = pos + 1  # the attributes byte, unused in v2
        while buf[p] >= 0x80:  # the timestamp delta, not needed
            p += 1
        p += 1
        byte = buf[p]
        if byte < 0x80:
            delta = (byte >> 1) ^ -(byte & 1)
            p += 1
        elif buf[p + 1] < 0x80:
            delta = (byte & 0x7F) | (buf[p + 1] << 7)
            delta = (delta >> 1) ^ -(delta & 1)
            p += 2
        else:
            delta, p = _varint(buf, p)
        byte = buf[p]
        if byte < 0x80:
            key_length = (byte >> 1) ^ -(byte & 1)
            p += 1
        else:
            key_length, p = _varint(buf, p)
        if key_length > 0:
            p += key_length
        byte = buf[p]
        if byte < 0x80:
            value_length = (byte >> 1) ^ -(byte & 1)
            p += 1
        elif buf[p + 1] < 0x80:
            value_length = (byte & 0x7F) | (buf[p + 1] << 7)
            value_length = (value_length >> 1) ^ -(value_length & 1)
            p += 2
        else:
            value_length, p = _varint(buf, p)
        if value_length >= 0:
            if p + value_length > record_end:
                raise CorruptRecordError(f"a value of {value_length} bytes past its record")
            append((base_offset + delta, buf[p : p + value_length]))
        else:
            append((base_offset + delta, None))
        pos = record_end
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last record of a batch")
    return records


def v2_records(batch: DefaultRecordBatch) -> list[Record]:
    """The records of a v2 batch, decompressed if it is (kafka-python's codecs)."""
    iter(batch)  # decompresses into the batch's buffer
    return batch_records(bytes(batch._buffer), batch._pos, batch.records_count, batch.base_offset)


class LeanPartitionRecords(Fetcher.PartitionRecords):  # type: ignore[misc]
    """One fetched partition's records as `(offset, value)` pairs, decoded lean."""

    def _maybe_skip_record(self, record: Record) -> bool:
        return record[0] < self.fetch_offset  # type: ignore[no-any-return]

    def _unpack_records(
        self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any
    ) -> Iterator[Record]:
        """As kafka-python's, for a consumer that reads uncommitted and deserializes nothing."""
        try:
            batch = records.next_batch()
            last_batch = None
            while batch is not None:
                last_batch = batch
                if self.check_crcs and not batch.validate_crc():
                    raise CorruptRecordError(
                        f"Record batch for partition {self.topic_partition} at offset "
                        f"{batch.base_offset} failed crc check"
                    )
                if batch.magic == 2:
                    self.leader_epoch = batch.leader_epoch
                    if batch.attributes & _CONTROL:
                        self.next_fetch_offset = batch.next_offset
                        batch = records.next_batch()
                        continue
                    decoded = v2_records(batch)
                    self.records_read += len(decoded)
                    self.bytes_read += batch.size_in_bytes
                    for record in decoded:
                        self.next_fetch_offset = record[0] + 1
                        yield record
                else:
                    for legacy in batch:
                        if self.check_crcs and not legacy.validate_crc():
                            raise CorruptRecordError(
                                f"Record for partition {self.topic_partition} at offset "
                                f"{legacy.offset} failed crc check"
                            )
                        self.records_read += 1
                        self.bytes_read += legacy.size_in_bytes
                        self.next_fetch_offset = legacy.offset + 1
                        yield legacy.offset, legacy.value
                batch = records.next_batch()
            # v2 keeps a batch's last offset even when compaction removed its last
            # record: go on after it, or the same batch would be fetched again.
            if last_batch is not None and last_batch.magic == 2:
                self.next_fetch_offset = last_batch.next_offset
            self.drain()
        except StopIteration as exc:  # a generator must not leak StopIteration
            raise RuntimeError("StopIteration raised unpacking a record set") from exc


def make_lean(consumer: Any) -> Any:
    """`consumer`, its fetcher now yielding `(offset, value)` pairs instead of records."""
    if consumer.config.get("isolation_level", "read_uncommitted") != "read_uncommitted":
        # Reading committed filters aborted transactions, which the lean path does not.
        raise ValueError("lean record decoding reads uncommitted only")
    consumer._fetcher.PartitionRecords = LeanPartitionRecords
    return consumer
