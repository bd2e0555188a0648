"""The Kafka source's driver logic without a broker: replay from the log, retries, decoding."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.common.retry import with_retries
from streaming_app.errors import CheckpointError, ConfigError, StopRequestedError
from streaming_app.settings.loading import load_config
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.offset_log import OffsetLog
from streaming_app.sources.kafka.offsets import BrokerOffsets, OffsetRange
from streaming_app.sources.kafka.planner import ranges_for_batch
from streaming_app.sources.kafka.reader import decode_value
from streaming_app.sources.kafka.runtime import StatsParam
from streaming_app.sources.kafka.settings import KafkaSettings


def settings(tmp_path: Path, **overrides: object) -> KafkaSettings:
    config = load_config(
        env={},
        cli={"source": "kafka", "topics": "t", "checkpoint_dir": str(tmp_path), **overrides},
    )
    return KafkaSettings.from_config(config)


class FakeBroker:
    """Stands in for the broker's answers; counts how often it was asked."""

    def __init__(self, latest: dict) -> None:
        self.latest = latest
        self.calls: list[bool] = []

    def __call__(self, want_committed: bool) -> BrokerOffsets:
        self.calls.append(want_committed)
        return BrokerOffsets(earliest={tp: 0 for tp in self.latest}, latest=dict(self.latest))


def test_new_batch_is_logged_before_it_is_returned(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    broker = FakeBroker({("t", 0): 5, ("t", 1): 2})
    ranges = ranges_for_batch(1000, log, broker, settings(tmp_path))
    assert ranges == [OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 2)]
    assert log.read_ranges(1000) == ranges


def test_replay_uses_the_log_and_never_asks_the_broker(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path)
    first = ranges_for_batch(1000, log, FakeBroker({("t", 0): 5}), s)
    grown = FakeBroker({("t", 0): 50})
    assert ranges_for_batch(1000, log, grown, s) == first  # same batch again: same ranges
    assert grown.calls == []
    assert ranges_for_batch(2000, log, grown, s) == [OffsetRange("t", 0, 5, 50)]


def test_a_missing_entry_older_than_the_newest_is_an_error_not_a_new_plan(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path)
    ranges_for_batch(5000, log, FakeBroker({("t", 0): 5}), s)
    with pytest.raises(CheckpointError, match="batch_time_ms=3000"):
        ranges_for_batch(3000, log, FakeBroker({("t", 0): 9}), s)


def test_while_draining_new_batches_are_planned_empty_at_the_previous_ends(
    tmp_path: Path,
) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path)
    ranges_for_batch(1000, log, FakeBroker({("t", 0): 5, ("t", 1): 3}), s)
    broker = FakeBroker({("t", 0): 50, ("t", 1): 30})
    drained = ranges_for_batch(2000, log, broker, s, draining=True)
    assert drained == [OffsetRange("t", 0, 5, 5), OffsetRange("t", 1, 3, 3)]
    assert broker.calls == []
    assert log.read_ranges(2000) == drained
    # After the restart (no longer draining) the stream goes on from there.
    assert ranges_for_batch(3000, log, broker, s) == [
        OffsetRange("t", 0, 5, 50),
        OffsetRange("t", 1, 3, 30),
    ]


def test_committed_offsets_are_asked_for_only_before_the_first_batch(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path, starting_offsets="committed", group_id="g")
    broker = FakeBroker({("t", 0): 5})
    ranges_for_batch(1000, log, broker, s)
    ranges_for_batch(2000, log, broker, s)
    assert broker.calls == [True, False]


def test_cap_comes_from_rate_times_batch_interval(tmp_path: Path) -> None:
    s = settings(tmp_path, max_rate_per_partition="3", batch_interval="2")
    log = OffsetLog(LocalFs(), str(tmp_path))
    assert ranges_for_batch(2000, log, FakeBroker({("t", 0): 100}), s) == [
        OffsetRange("t", 0, 0, 6)
    ]


def test_checkpointed_settings_carry_no_password(tmp_path: Path) -> None:
    config = load_config(
        env={"STREAMING_APP_SASL_PLAIN_PASSWORD": "hunter2"},
        cli={
            "source": "kafka",
            "topics": "t",
            "checkpoint_dir": str(tmp_path),
            "security_protocol": "sasl_ssl",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "u",
        },
    )
    assert "hunter2" not in repr(KafkaSettings.from_config(config))
    assert KafkaSettings.from_config(config).connection.sasl_plain_password is None
    live = KafkaConnection.from_config(config)
    assert live.kafka_kwargs()["sasl_plain_password"] == "hunter2"
    assert live.kafka_kwargs()["security_protocol"] == "SASL_SSL"
    assert "hunter2" not in repr(live)
    assert "hunter2" not in repr(config)


def test_kafka_settings_are_validated_together() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            env={},
            cli={
                "source": "kafka",
                "starting_offsets": "committed",
                "security_protocol": "sasl_plaintext",
                "max_rate_per_partition": "-1",
            },
        )
    message = str(info.value)
    for part in (
        "topics: required",
        "committed needs a group_id",
        "sasl_mechanism: required",
        "--max-rate-per-partition: must be 0",
    ):
        assert part in message


def test_decode_value_counts_every_case() -> None:
    stats: dict[str, int] = {}
    assert decode_value(b"hello world", 100, stats) == "hello world"
    assert decode_value(None, 100, stats) is None
    assert decode_value(b"", 100, stats) is None
    assert decode_value(b"x" * 101, 100, stats) is None
    assert decode_value(b"caf\xe9 ok", 100, stats) == "caf\ufffd ok"
    assert stats == {"records": 2, "empty": 2, "oversize": 1, "replaced": 1}


def test_stats_accumulate_per_batch_and_key() -> None:
    param = StatsParam()
    total = param.zero({})
    total = param.addInPlace(total, {1000: {"records": 2, "empty": 1}})
    total = param.addInPlace(total, {1000: {"records": 3}, 2000: {"oversize": 1}})
    assert total == {1000: {"records": 5, "empty": 1}, 2000: {"oversize": 1}}


def test_with_retries_backs_off_warns_and_succeeds(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    waits: list[float] = []

    class NoWait(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0)
            return False

    attempts = iter([OSError("connection refused")] * 7 + [None])

    def call() -> str:
        error = next(attempts)
        if error:
            raise error
        return "ok"

    resets: list[int] = []
    with caplog.at_level(logging.WARNING, logger="streaming_app.common.retry"):
        assert with_retries("reading offsets", call, NoWait(), lambda: resets.append(1)) == "ok"
    assert waits == [1, 2, 4, 8, 16, 30, 30]
    assert len(resets) == 7
    assert (
        "reading offsets failed (attempt 1): OSError: connection refused; retrying in 1 s"
        in caplog.text
    )
    assert "succeeded after 7 failed attempts" in caplog.text


def test_with_retries_gives_up_only_when_stopping() -> None:
    stop = threading.Event()

    def call() -> None:
        stop.set()
        raise OSError("down")

    with pytest.raises(StopRequestedError, match="gave up on reading offsets"):
        with_retries("reading offsets", call, stop)


def test_a_batch_whose_sink_failed_is_not_committed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from datetime import datetime

    from streaming_app.sinks.commit import commit_batch, mark_written, take_written

    batch_time = datetime.fromtimestamp(1_700_000_000)
    mark_written(1_700_000_000_000, "console")  # the files sink failed: never marked
    mark_written(1_699_999_999_000, "files")  # an older batch: forgotten with it
    with caplog.at_level(logging.WARNING):
        commit_batch(batch_time, None, settings(tmp_path), ("files", "console"))  # type: ignore[arg-type]
    assert "batch_time_ms=1700000000000: not committed: sink(s) files did not" in caplog.text
    assert not (tmp_path / "commits").exists()
    assert take_written(1_699_999_999_000) == set()


def test_committed_offsets_are_asked_for_until_a_partition_has_a_position(tmp_path: Path) -> None:
    log = OffsetLog(LocalFs(), str(tmp_path))
    s = settings(tmp_path, starting_offsets="committed", group_id="g")
    missing = FakeBroker({})  # the topic does not exist yet
    assert ranges_for_batch(1000, log, missing, s) == []
    broker = FakeBroker({("t", 0): 5})
    ranges_for_batch(2000, log, broker, s)
    ranges_for_batch(3000, log, broker, s)
    assert missing.calls + broker.calls == [True, True, False]


def test_check_reachable_probes_the_bootstrap_servers_before_a_client_is_built() -> None:
    import socket

    from streaming_app.sources.kafka.client import _host_port, check_reachable

    assert _host_port("broker:9093") == ("broker", 9093)
    assert _host_port(" broker ") == ("broker", 9092)
    assert _host_port("[::1]:9094") == ("::1", 9094)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            dead = closed.getsockname()[1]
        check_reachable(KafkaConnection(f"127.0.0.1:{dead},127.0.0.1:{port}"))
    with pytest.raises(OSError, match=f"no bootstrap server accepts connections .*:{dead}"):
        check_reachable(KafkaConnection(f"127.0.0.1:{dead}"), timeout=1)
