"""The Kafka reader without a broker: value decoding, and giving up on an unreachable broker."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from streaming_app.errors import PeerUnreachableError
from streaming_app.sources.kafka import reader
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.offsets import OffsetRange
from streaming_app.sources.kafka.reader import decode_value, in_range, joined_text, read_range

BROKER = KafkaConnection("10.0.0.2:9092")
NO_ROUTE = "no bootstrap server accepts connections (10.0.0.2:9092: No route to host)"


def test_decode_value_counts_every_case() -> None:
    stats: dict[str, int] = {}
    assert decode_value(b"hello world", 100, stats) == "hello world"
    assert decode_value(None, 100, stats) is None
    assert decode_value(b"", 100, stats) is None
    assert decode_value(b"x" * 101, 100, stats) is None
    assert decode_value(b"caf\xe9 ok", 100, stats) == "caf\ufffd ok"
    assert stats == {"records": 2, "empty": 2, "oversize": 1, "replaced": 1}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake clock for the reader: sleeping moves it on."""
    now = [0.0]
    monkeypatch.setattr(reader.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(reader.time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    return now


def refuse_after_3_s(now: list[float]) -> Any:
    def refuse(connection: KafkaConnection, timeout: float = 5.0) -> None:
        now[0] += 3
        raise OSError(NO_ROUTE)

    return refuse


def test_a_read_that_cannot_connect_gives_up_60_s_after_kafka_give_up_after(
    clock: list[float], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver, asking the broker every batch, gives up first; a read only after it."""
    monkeypatch.setattr(reader, "check_reachable", refuse_after_3_s(clock))
    offset_range = OffsetRange("t", 1, 0, 10)
    with (
        caplog.at_level(logging.WARNING, logger=reader.__name__),
        pytest.raises(PeerUnreachableError) as raised,
    ):
        list(read_range(offset_range, BROKER, 100, "fail", give_up_after=10))
    # Attempts of 3 s, 2 s apart: the 15th ends 73 s after the first began.
    assert str(raised.value) == (
        "reading topic=t partition=1 from the Kafka broker at 10.0.0.2:9092: unreachable for "
        f"73 s (15 attempts, the last: OSError: {NO_ROUTE}); gave up (kafka_give_up_after = "
        "10 s, and 60 s more in a read); a restart resumes from the checkpoint"
    )
    # A warning at attempts 1, 2, 4 and 8 of the 14 that were retried.
    warned = re.findall(
        r"broker unreachable \(OSError, attempt (\d+)\); retrying every 2 s", caplog.text
    )
    assert warned == ["1", "2", "4", "8"], caplog.text


def test_without_kafka_give_up_after_a_read_waits_for_the_broker(
    clock: list[float], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    failures = iter(range(500))  # 40 minutes without the broker, then it answers

    def reachable_at_last(connection: KafkaConnection, timeout: float = 5.0) -> None:
        if next(failures, None) is not None:
            refuse_after_3_s(clock)(connection)

    monkeypatch.setattr(reader, "check_reachable", reachable_at_last)
    monkeypatch.setattr(reader, "new_consumer", lambda **kwargs: "consumer")
    monkeypatch.setattr("streaming_app.sources.kafka.records.make_lean", lambda c: c)
    offset_range = OffsetRange("t", 0, 0, 10)
    limit = reader._Limit(BROKER, offset_range, None)
    with caplog.at_level(logging.WARNING, logger=reader.__name__):
        assert reader._connect(BROKER, 100, offset_range, limit) == "consumer"
    assert clock[0] > 2400
    # 40 minutes of retries every 2 s make 10 lines, not 500; and one once it is back.
    lines = caplog.text.splitlines()
    assert len(lines) == 10, lines
    assert re.search(r"attempt 256\); retrying every 2 s$", lines[-2]), lines
    assert lines[-1].endswith("reading topic=t partition=0: broker back after 500 failed attempts")


class SilentConsumer:
    """Connected, but the broker has gone silent: every poll waits its timeout, empty."""

    def __init__(self, now: list[float]) -> None:
        self.now = now

    def assign(self, partitions: list[Any]) -> None:
        pass

    def seek(self, partition: Any, offset: int) -> None:
        pass

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, Any]:
        self.now[0] += timeout_ms / 1000
        return {}

    def position(self, partition: Any) -> int:
        return 3

    def close(self) -> None:
        pass


def test_a_read_whose_broker_goes_silent_gives_up_60_s_after_kafka_give_up_after(
    clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "_connect", lambda *args: SilentConsumer(clock))
    with pytest.raises(PeerUnreachableError) as raised:
        list(read_range(OffsetRange("t", 0, 3, 10), BROKER, 100, "fail", give_up_after=5))
    assert str(raised.value) == (
        "reading topic=t partition=0 from the Kafka broker at 10.0.0.2:9092: unreachable for "
        "65 s (no records at offset 3 of range 3-10); gave up (kafka_give_up_after = 5 s, and "
        "60 s more in a read); a restart resumes from the checkpoint"
    )


def test_joined_text_decodes_the_usual_values_at_once() -> None:
    stats: dict[str, int] = {}
    assert joined_text([b"a b", b"c\nd", "\u00e9".encode()], 100, stats) == ("a b\nc\nd\n\u00e9", 3)
    assert stats == {}  # the caller counts the values used without a problem


@pytest.mark.parametrize(
    "values",
    [
        [b"a", None, b"b"],
        [b"a", b"", b"b"],
        [b"a", b"x" * 101, b"b"],
        [b"a", b"caf\xe9 ok", b"b"],
        [b"\xff", b"\xc3"],  # a truncated sequence at a value's end stays in its value
        [None, b""],
    ],
)
def test_joined_text_counts_skipped_and_replaced_values_as_one_by_one(
    values: list[bytes | None],
) -> None:
    stats: dict[str, int] = {}
    text, used = joined_text(values, 100, stats)
    one_by_one: dict[str, int] = {}
    texts = [decode_value(v, 100, one_by_one) for v in values]
    assert text == "\n".join(t for t in texts if t is not None)
    assert used == 0 and stats == one_by_one


def test_in_range_keeps_the_records_of_the_range() -> None:
    records = [(3, b"a"), (4, b"b"), (5, b"c"), (6, b"d")]
    assert in_range(records, 3, 10) == (records, 7)
    assert in_range(records, 5, 10) == (records[2:], 7)
    assert in_range(records, 3, 5) == (records[:2], 5)
    assert in_range(records, 4, 6) == (records[1:3], 6)
    assert in_range(records, 7, 10) == ([], 7)
    assert in_range(records[:1], 3, 4) == (records[:1], 4)
    assert in_range([], 3, 10) == ([], 3)
    gap = [(3, b"a"), (4, b"b"), (7, b"c")]  # offsets 5 and 6 compacted away
    assert in_range(gap, 3, 6) == (gap[:2], 6)


class PollingConsumer(SilentConsumer):
    """Connected: each poll returns the next of `polls`, then nothing."""

    def __init__(self, now: list[float], polls: list[list[tuple[int, bytes | None]]]) -> None:
        super().__init__(now)
        self.polls = iter(polls)

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, Any]:
        from kafka import TopicPartition

        records = next(self.polls, None)
        return {TopicPartition("t", 0): records} if records is not None else {}


class Stats:
    def __init__(self) -> None:
        self.added: list[dict[int, dict[str, int]]] = []

    def add(self, value: dict[int, dict[str, int]]) -> None:
        self.added.append(value)


def test_a_joined_read_gives_the_same_lines_and_counts_as_one_by_one(
    clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    polls = [
        [(1, b"skipped: before the range"), (2, b"a b"), (3, b"c")],
        [(4, None), (5, b"caf\xe9"), (6, b"x" * 101), (7, b"")],
        [(8, "d \u00e9".encode()), (9, b"e\nf"), (10, b"past the range")],
    ]
    found = {}
    for joined in (False, True):
        monkeypatch.setattr(reader, "_connect", lambda *args: PollingConsumer(clock, polls))
        stats = Stats()
        texts = list(
            read_range(OffsetRange("t", 0, 2, 10), BROKER, 100, "fail", 7, stats, joined=joined)
        )
        found[joined] = ("\n".join(texts), stats.added)
    assert found[True] == found[False]
    assert found[True] == (
        "a b\nc\ncaf\ufffd\nd \u00e9\ne\nf",
        [{7: {"records": 5, "empty": 2, "oversize": 1, "replaced": 1}}],
    )
