"""The Kafka source's driver-process state: read statistics, and giving up on the broker."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from streaming_app.common import retry
from streaming_app.common.fs import LocalFs
from streaming_app.errors import PeerUnreachableError
from streaming_app.settings.loading import load_config
from streaming_app.sources.kafka import planner, runtime
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.offset_log import OffsetLog
from streaming_app.sources.kafka.runtime import StatsParam, broker_offsets, configure_runtime
from streaming_app.sources.kafka.settings import KafkaSettings


def test_stats_accumulate_per_batch_and_key() -> None:
    param = StatsParam()
    total = param.zero({})
    total = param.addInPlace(total, {1000: {"records": 2, "empty": 1}})
    total = param.addInPlace(total, {1000: {"records": 3}, 2000: {"oversize": 1}})
    assert total == {1000: {"records": 5, "empty": 1}, 2000: {"oversize": 1}}


class Clock(threading.Event):
    """A stop signal that is never set, whose waits move a fake clock on instead of waiting."""

    def __init__(self, now: list[float]) -> None:
        super().__init__()
        self.now = now

    def wait(self, timeout: float | None = None) -> bool:
        self.now[0] += timeout or 0
        return False


class DownBroker:
    """A broker that never answers: each attempt takes 5 s of the fake clock, then fails."""

    def __init__(self, now: list[float]) -> None:
        self.now = now
        self.connection = KafkaConnection("10.0.0.2:9092")
        self.attempts = 0

    def offsets(self, *args: Any) -> None:
        self.attempts += 1
        self.now[0] += 5
        raise OSError("no bootstrap server accepts connections (10.0.0.2:9092: No route to host)")

    def close(self) -> None:
        pass


@pytest.fixture
def down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[DownBroker, KafkaSettings]:
    """Today's config with kafka_give_up_after = 20 s, and a broker that stays away."""
    now = [100.0]
    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(runtime, "RUNTIME", runtime._Runtime())
    config = load_config(
        env={"STREAMING_APP_KAFKA_GIVE_UP_AFTER": "20"},
        cli={"source": "kafka", "topics": "t", "checkpoint_dir": str(tmp_path)},
    )
    configure_runtime(config, Clock(now))
    broker = DownBroker(now)
    runtime.RUNTIME.broker = broker  # type: ignore[assignment]
    return broker, KafkaSettings.from_config(config)


def test_planning_gives_up_after_kafka_give_up_after_and_the_batches_behind_it_at_once(
    down: tuple[DownBroker, KafkaSettings],
) -> None:
    broker, settings = down
    with pytest.raises(PeerUnreachableError) as raised:
        broker_offsets(settings, False)
    # 5 s an attempt, backing off 1, 2, then the 2 s left: the fourth attempt ends at 25 s.
    assert str(raised.value) == (
        "reading offsets of t from the Kafka broker at 10.0.0.2:9092: unreachable for 25 s "
        "(4 attempts, the last: OSError: no bootstrap server accepts connections "
        "(10.0.0.2:9092: No route to host)); gave up (kafka_give_up_after = 20 s); a restart "
        "resumes from the checkpoint"
    )
    assert broker.attempts == 4
    # The run is ending: a batch queued behind it gives up with the same line, unasked.
    with pytest.raises(PeerUnreachableError) as again:
        broker_offsets(settings, False)
    assert str(again.value) == str(raised.value) and broker.attempts == 4


def test_planning_that_gives_up_turns_sparks_log_off_first(
    down: tuple[DownBroker, KafkaSettings], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Spark would log the failed job generation with the traceback and a Java stack trace,
    before the run ends with the error's one line."""
    _, settings = down
    log = OffsetLog(LocalFs(), str(tmp_path))
    monkeypatch.setattr(planner, "offset_log_for", lambda sc, directory: log)
    rdd = mock.MagicMock(name="RDD")
    with pytest.raises(PeerUnreachableError):
        planner.plan_batch(datetime.fromtimestamp(1000), rdd, settings)
    rdd.context.setLogLevel.assert_called_once_with("OFF")
    assert log.batch_times() == []  # nothing was planned
