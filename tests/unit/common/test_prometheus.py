"""The Prometheus endpoint: each batch's record as series, served over HTTP on loopback."""

from __future__ import annotations

import socket
import time
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming_app.common.health import ALIVE_SECONDS
from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.metrics_recorder import MetricsRecorder
from streaming_app.common.prometheus import (
    Endpoint,
    PartitionPosition,
    endpoint,
    start_endpoint,
    stop_endpoint,
)
from streaming_app.errors import ConfigError

INFO = {
    "version": "0.4.0",
    "engine": "dstream",
    "app_job": "wordcount",
    "source": "kafka",
    "sinks": "files",
}


def batch(
    at_ms: int, records: int | None = 100, delay_ms: int = 0, words: int | None = None
) -> BatchMetrics:
    return BatchMetrics(
        batch_time_ms=at_ms,
        batch_interval_ms=2000,
        records=records,
        processing_ms=400,
        scheduling_delay_ms=delay_ms,
        total_delay_ms=delay_ms + 400,
        kafka_lag=7,
        completed_ms=at_ms + 450,
        words=words,
        state_keys=None if words is None else at_ms // 1000,
    )


def samples(endpoint: Endpoint) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the registry, by name and labels."""
    from prometheus_client import generate_latest

    text = generate_latest(endpoint.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_batch_counts_and_sets_every_series() -> None:
    served = Endpoint(INFO)
    served.observe(
        batch(10_000),
        False,
        [PartitionPosition("words", 0, 40, 45), PartitionPosition("words", 1, 9, None)],
    )
    served.observe(batch(12_000, records=None, words=250), True)
    got = samples(served)
    assert got[("streaming_app_batches_total", ())] == 2
    assert got[("streaming_app_records_total", ())] == 100  # an unknown count adds nothing
    assert got[("streaming_app_last_batch_timestamp_seconds", ())] == 12.0
    assert got[("streaming_app_last_batch_completed_timestamp_seconds", ())] == 12.45
    assert got[("streaming_app_batch_interval_seconds", ())] == 2.0
    assert got[("streaming_app_batch_processing_seconds_count", ())] == 2
    assert got[("streaming_app_batch_processing_seconds_sum", ())] == pytest.approx(0.8)
    assert got[("streaming_app_batch_scheduling_delay_seconds_bucket", (("le", "0.05"),))] == 2
    assert got[("streaming_app_falling_behind", ())] == 1
    assert got[("streaming_app_words_total", ())] == 250  # an unknown count adds nothing
    assert got[("streaming_app_state_keys", ())] == 12
    labels = (("partition", "0"), ("topic", "words"))
    assert got[("streaming_app_kafka_processed_offset", labels)] == 40
    assert got[("streaming_app_kafka_latest_offset", labels)] == 45
    assert got[("streaming_app_kafka_lag_records", labels)] == 5
    other = (("partition", "1"), ("topic", "words"))
    assert got[("streaming_app_kafka_processed_offset", other)] == 9
    assert ("streaming_app_kafka_lag_records", other) not in got  # the latest is unknown
    assert got[("streaming_app_info", tuple(sorted(INFO.items())))] == 1
    assert any(name.startswith("process_") for name, _ in got)


TIMESTAMPS = (
    "streaming_app_last_batch_timestamp_seconds",
    "streaming_app_last_batch_completed_timestamp_seconds",
    "streaming_app_last_progress_timestamp_seconds",
    "streaming_app_batch_interval_seconds",
    "streaming_app_falling_behind",
    "streaming_app_state_keys",
)


def test_before_the_first_batch_no_timestamp_is_served_and_the_app_is_not_ready() -> None:
    served = Endpoint(INFO)
    got = samples(served)
    assert not [name for name, _ in got if name in TIMESTAMPS]  # not 0: that reads as 1970
    assert got[("streaming_app_ready", ())] == 0
    assert ("streaming_app_snapshot_interval_seconds", ()) not in got
    served.observe(batch(10_000, words=5), False)
    got = samples(served)
    assert {name for name, _ in got} >= set(TIMESTAMPS)
    assert got[("streaming_app_last_progress_timestamp_seconds", ())] == 10.45
    assert got[("streaming_app_ready", ())] == 1


def test_replayed_batches_leave_the_app_unready_and_an_idle_trigger_is_progress() -> None:
    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        recorder = MetricsRecorder(None, progress=False)
        recorder.replay_until_ms = 12_000  # a recovered run's missed intervals
        recorder.record(batch(10_000))
        recorder.record(batch(12_000))
        got = samples(served)
        assert got[("streaming_app_ready", ())] == 0
        assert got[("streaming_app_last_progress_timestamp_seconds", ())] == 12.45
        recorder.record(batch(14_000))
        assert samples(served)[("streaming_app_ready", ())] == 1
    finally:
        stop_endpoint()
    idle = start_endpoint("127.0.0.1", 0, INFO)
    try:  # the structured engine with no input: no batch, but the stream is up to date
        before = time.time()
        MetricsRecorder(None, progress=False).idle()
        got = samples(idle)
        assert got[("streaming_app_last_progress_timestamp_seconds", ())] >= before
        assert got[("streaming_app_ready", ())] == 1
        assert got[("streaming_app_falling_behind", ())] == 0
        assert ("streaming_app_last_batch_completed_timestamp_seconds", ()) not in got
    finally:
        stop_endpoint()


def test_the_recorder_feeds_the_processs_endpoint_with_its_falling_behind_flag() -> None:
    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        recorder = MetricsRecorder(None, progress=False)
        for n in range(6):  # the scheduling delay grows past the interval: falling behind
            recorder.record(batch(10_000 + 2000 * n, delay_ms=1000 * (n + 1)))
        assert samples(served)[("streaming_app_falling_behind", ())] == 1
        assert samples(served)[("streaming_app_batches_total", ())] == 6
        port = served._server.server_address[1]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
        assert "streaming_app_batches_total 6.0" in body
    finally:
        stop_endpoint()
    assert endpoint() is None


def test_a_port_in_use_is_one_line_naming_metrics_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            ConfigError, match=rf"^metrics_port {port} on metrics_host 127.0.0.1: cannot listen"
        ):
            start_endpoint("127.0.0.1", port, INFO)
    assert endpoint() is None


def test_an_operation_that_succeeds_is_timed_and_stamped_one_that_fails_is_not() -> None:
    from streaming_app.common.prometheus import timed

    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        with timed("snapshot"):
            pass
        with pytest.raises(OSError), timed("commit"):
            raise OSError("disk full")
        got = samples(served)
        assert (
            got[("streaming_app_operation_duration_seconds_count", (("operation", "snapshot"),))]
            == 1
        )
        assert (
            got[("streaming_app_last_success_timestamp_seconds", (("operation", "snapshot"),))] > 0
        )
        assert (
            "streaming_app_last_success_timestamp_seconds",
            (("operation", "commit"),),
        ) not in got
        assert got[("streaming_app_failures_total", (("operation", "commit"),))] == 1
        assert got[("streaming_app_failures_total", (("operation", "snapshot"),))] == 0
    finally:
        stop_endpoint()
    with timed("snapshot"):  # no endpoint: nothing to do, no error
        pass


def test_failures_are_served_at_0_for_what_the_run_can_fail() -> None:
    got = samples(Endpoint(INFO | {"sinks": "files,postgres"}))
    failing = {
        dict(labels)["operation"] for name, labels in got if name == "streaming_app_failures_total"
    }
    assert failing == {"snapshot", "checkpoint", "batch", "commit", "files", "postgres"}
    files_only = samples(Endpoint(INFO | {"source": "files", "sinks": "files"}))
    assert ("streaming_app_failures_total", (("operation", "commit"),)) not in files_only


def test_a_files_write_that_fails_counts() -> None:
    from streaming_app.sinks import files

    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        with pytest.raises(OSError, match="full"):
            settings = SimpleNamespace(output_dir="/out", batch_ms=1000)
            files.write_chain(Broken(), settings, 1000, None, lambda d: None)  # type: ignore[arg-type]
        assert samples(served)[("streaming_app_failures_total", (("operation", "files"),))] == 1
    finally:
        stop_endpoint()


class Broken:
    """A file system whose every call fails as a full disk does."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any) -> Any:
            raise OSError("No space left on device: full")

        return fail


def test_bad_values_and_retries_are_counted_by_label_from_zero() -> None:
    from streaming_app.common.prometheus import count_bad_values, count_retry

    count_bad_values({"oversize": 2})  # no endpoint: nothing to do, no error
    count_retry("kafka")
    served = start_endpoint("127.0.0.1", 0, {**INFO, "app_job": "keyed-sum"})
    try:
        before = samples(served)
        # Every reason the run can report is there at 0, so increase() sees the first.
        for reason in ("empty", "oversize", "replaced", "lost", "csv_columns", "csv_range"):
            assert before[("streaming_app_bad_values_total", (("reason", reason),))] == 0
        assert before[("streaming_app_retries_total", (("peer", "postgres"),))] == 0
        count_bad_values({"oversize": 2, "csv_value": 1, "empty": 0})
        count_bad_values({"oversize": 1})
        count_retry("postgres")
        got = samples(served)
        assert got[("streaming_app_bad_values_total", (("reason", "oversize"),))] == 3
        assert got[("streaming_app_bad_values_total", (("reason", "csv_value"),))] == 1
        assert got[("streaming_app_bad_values_total", (("reason", "empty"),))] == 0
        assert got[("streaming_app_retries_total", (("peer", "postgres"),))] == 1
        assert got[("streaming_app_retries_total", (("peer", "kafka"),))] == 0
    finally:
        stop_endpoint()


def test_a_retried_call_is_counted_under_its_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import streaming_app.common.retry as retry

    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        calls = iter([OSError("refused"), OSError("refused"), "ok"])

        def call() -> str:
            outcome = next(calls)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        monkeypatch.setattr(retry, "BACKOFF_FIRST_SECONDS", 0.01)
        assert retry.with_retries("reading", call, threading.Event(), peer="kafka") == "ok"
        assert samples(served)[("streaming_app_retries_total", (("peer", "kafka"),))] == 2
    finally:
        stop_endpoint()


def get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of a GET on the endpoint's port."""
    import urllib.error

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_endpoints_beside_the_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    from streaming_app.common import prometheus

    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        port = served._server.server_address[1]
        assert get(port, "/healthz") == (200, "starting\n")  # a recovery may take minutes
        assert get(port, "/readyz") == (503, "the first batch has not completed\n")
        prometheus.beat()  # the driver's loop came round
        assert get(port, "/healthz") == (200, "alive\n")
        MetricsRecorder(None, progress=False).record(batch(10_000))
        assert get(port, "/readyz") == (200, "ready\n")
        status, body = get(port, "/metrics")
        assert status == 200 and "streaming_app_ready 1.0" in body
        later = time.monotonic() + ALIVE_SECONDS + 5  # the JVM froze since
        monkeypatch.setattr(served.health, "_clock", lambda: later)
        status, body = get(port, "/healthz")
        assert status == 503 and "has not come round for 35 s" in body
    finally:
        stop_endpoint()


def test_a_batch_that_leaves_lag_behind_calls_the_lag_watch_and_one_caught_up_does_not() -> None:
    served = Endpoint(INFO)
    woken: list[int] = []
    served.kafka.on_lag(lambda: woken.append(1))
    served.observe(batch(2_000), False, [PartitionPosition("words", 0, 40, 40)])
    served.observe(batch(4_000), False, [PartitionPosition("words", 0, 40, None)])
    assert woken == []  # caught up: lag 0, and 0 seconds, known without the broker
    labels = (("partition", "0"), ("topic", "words"))
    assert samples(served)[("streaming_app_kafka_lag_seconds", labels)] == 0
    served.observe(batch(6_000), False, [PartitionPosition("words", 0, 50, 80)])
    assert woken == [1]
    # The broker's latest known from the watch; a batch short of it wakes the watch too.
    served.observe(batch(8_000), False, [PartitionPosition("words", 0, 70, None)])
    assert woken == [1, 1]
