"""The Kafka reader's value decoding, without a broker."""

from __future__ import annotations

from streaming_app.sources.kafka.reader import decode_value


def test_decode_value_counts_every_case() -> None:
    stats: dict[str, int] = {}
    assert decode_value(b"hello world", 100, stats) == "hello world"
    assert decode_value(None, 100, stats) is None
    assert decode_value(b"", 100, stats) is None
    assert decode_value(b"x" * 101, 100, stats) is None
    assert decode_value(b"caf\xe9 ok", 100, stats) == "caf\ufffd ok"
    assert stats == {"records": 2, "empty": 2, "oversize": 1, "replaced": 1}
