"""The structured Kafka source's planner calls to the broker: retries and giving up (no JVM)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming_app.common import retry
from streaming_app.errors import PeerUnreachableError
from streaming_app.settings.loading import load_config
from streaming_app.structured import kafka_source
from streaming_app.structured.kafka_options import KafkaReadSettings
from streaming_app.structured.kafka_source import KafkaStreamReader

NO_ROUTE = "no bootstrap server accepts connections (10.0.0.2:9092: No route to host)"


def test_the_planner_gives_up_after_kafka_give_up_after_in_the_dstream_engines_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])

    class DownBroker:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def offsets(self, *args: Any) -> None:
            now[0] += 12  # a request that times out
            raise OSError(NO_ROUTE)

        def close(self) -> None:
            pass

    monkeypatch.setattr(kafka_source, "Broker", DownBroker)
    config = load_config(
        None,
        cli={"source": "kafka", "topics": "t", "bootstrap_servers": "10.0.0.2:9092"},
        env={"STREAMING_APP_KAFKA_GIVE_UP_AFTER": "10"},
    )
    reader = KafkaStreamReader(KafkaReadSettings.from_config(config))
    with pytest.raises(PeerUnreachableError) as raised:
        reader.initialOffset()
    assert str(raised.value) == (
        "reading offsets of t from the Kafka broker at 10.0.0.2:9092: unreachable for 12 s "
        f"(1 attempt: OSError: {NO_ROUTE}); gave up (kafka_give_up_after = 10 s); a restart "
        "resumes from the checkpoint"
    )
