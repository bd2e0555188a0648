"""Per-batch metrics: the JSON lines `report` reads, progress lines, the falling-behind warning."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.metrics_record import BatchMetrics, read_metrics
from streaming_app.common.metrics_recorder import MetricsRecorder, known, progress_line
from streaming_app.common.prometheus import PartitionPosition
from streaming_app.dstream.listener import LoggingListener, receiver_warning
from streaming_app.settings.loading import load_config
from streaming_app.sources import line_counts
from streaming_app.tools.report import summarize

T0 = 1_795_000_000_000


def batch(n: int, delay: int | None = 5, records: int | None = 100) -> BatchMetrics:
    return BatchMetrics(
        batch_time_ms=T0 + n * 2000,
        batch_interval_ms=2000,
        records=records,
        processing_ms=400,
        scheduling_delay_ms=delay,
        total_delay_ms=None if delay is None else delay + 400,
        kafka_lag=None,
        completed_ms=T0 + n * 2000 + 500,
    )


def test_each_batch_is_one_json_line_that_report_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    recorder = MetricsRecorder(str(path), progress=False)
    for n in range(3):
        recorder.record(batch(n, records=10 * n))
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[1])["records"] == 10
    records, skipped = read_metrics(path)
    assert skipped == 0
    assert [r.records for r in records] == [0, 10, 20]
    assert summarize(records).records == 30


def test_unknown_records_stay_unknown_in_the_report(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    recorder = MetricsRecorder(str(path), progress=False)
    recorder.record(batch(0, records=None))
    summary = summarize(read_metrics(path)[0])
    assert summary.records is None and summary.throughput is None


def test_progress_line_per_batch(caplog: pytest.LogCaptureFixture) -> None:
    recorder = MetricsRecorder(None, progress=True)
    with caplog.at_level(logging.INFO, logger="streaming_app.common.metrics_recorder"):
        recorder.record(batch(0))
    assert "records=100 processing=0.40s scheduling_delay=0.01s total_delay=0.41s" in caplog.text
    quiet = MetricsRecorder(None, progress=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="streaming_app.common.metrics_recorder"):
        quiet.record(batch(1))
    assert caplog.text == ""


def test_progress_line_shows_kafka_lag_and_unknowns() -> None:
    record = BatchMetrics(T0, 1000, None, None, None, None, 42, T0)
    line = progress_line(record)
    assert "records=? processing=? scheduling_delay=? total_delay=? kafka_lag=42" in line


def test_a_growing_scheduling_delay_is_warned_about_once_until_it_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = MetricsRecorder(None, progress=False)
    with caplog.at_level(logging.INFO, logger="streaming_app.common.metrics_recorder"):
        for n, delay in enumerate([100, 900, 1800, 2600, 3500, 4400, 5300]):
            recorder.record(batch(n, delay))
        assert caplog.text.count("cannot keep up") == 1
        assert "grew for 5 batches in a row to 3.5 s" in caplog.text
        recorder.record(batch(8, 100))
        assert "back under one batch interval" in caplog.text
        for n, delay in enumerate([2100, 2200, 2300, 2400, 2500]):
            recorder.record(batch(9 + n, delay))
    assert caplog.text.count("cannot keep up") == 2


def test_batches_that_drain_during_a_stop_are_not_falling_behind(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from streaming_app.common import metrics_recorder

    monkeypatch.setattr(metrics_recorder, "STOPPING", threading.Event())
    recorder = MetricsRecorder(None, progress=False)
    metrics_recorder.note_stopping()  # told to stop after an outage: the queue drains
    with caplog.at_level(logging.INFO, logger="streaming_app.common.metrics_recorder"):
        for n, delay in enumerate([100, 2000, 4000, 6000, 8000, 10000, 12000]):
            recorder.record(batch(n, delay))
    assert "cannot keep up" not in caplog.text


def test_replayed_intervals_of_a_recovered_run_are_not_falling_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = MetricsRecorder(None, progress=False)
    recorder.replay_until_ms = T0 + 6 * 2000
    with caplog.at_level(logging.INFO, logger="streaming_app.common.metrics_recorder"):
        # The missed intervals, queued at once at the restart: their delay grows.
        for n, delay in enumerate([100, 2000, 4000, 6000, 8000, 10000, 12000]):
            recorder.record(batch(n, delay))
        assert "cannot keep up" not in caplog.text
        # After them the backlog shrinks: no warning either.
        for n, delay in enumerate([11000, 9000, 7000, 5000, 3000]):
            recorder.record(batch(7 + n, delay))
        assert "cannot keep up" not in caplog.text
        # A delay that grows after the replay is falling behind.
        for n, delay in enumerate([3100, 3200, 3300, 3400, 3500]):
            recorder.record(batch(12 + n, delay))
    assert caplog.text.count("cannot keep up") == 1


def test_the_listener_of_a_recovered_run_knows_its_replay(tmp_path: Path) -> None:
    config = load_config(cli={"checkpoint_dir": str(tmp_path)})
    listener = LoggingListener.for_config(config, T0)
    assert listener.recorder is not None and listener.recorder.replay_until_ms == T0
    fresh = LoggingListener.for_config(config)
    assert fresh.recorder is not None and fresh.recorder.replay_until_ms is None


def test_a_delay_under_the_interval_is_not_falling_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = MetricsRecorder(None, progress=False)
    with caplog.at_level(logging.WARNING, logger="streaming_app.common.metrics_recorder"):
        for n, delay in enumerate([10, 20, 30, 40, 50, 60]):
            recorder.record(batch(n, delay))
    assert "cannot keep up" not in caplog.text


def test_an_unwritable_metrics_file_is_a_warning_not_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = MetricsRecorder(str(tmp_path / "missing" / "m.jsonl"), progress=False)
    recorder.record(batch(0))
    assert "could not append to metrics_file" in caplog.text


class _Time:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def milliseconds(self) -> int:
        return self.ms


class _Info:
    """The JavaBatchInfo methods the listener calls."""

    def batchTime(self) -> _Time:  # noqa: N802
        return _Time(T0)

    def numRecords(self) -> int:  # noqa: N802
        return 7

    def processingDelay(self) -> int:  # noqa: N802
        return 120

    def schedulingDelay(self) -> int:  # noqa: N802
        return 3

    def totalDelay(self) -> int:  # noqa: N802
        return -1


class _Completed:
    def batchInfo(self) -> _Info:  # noqa: N802
        return _Info()


class _FakeAccumulator:
    def __init__(self, value: dict[int, dict[int, int]]) -> None:
        self.value = value


class _Keep(MetricsRecorder):
    def __init__(self) -> None:
        super().__init__(None, progress=False)
        self.seen: list[BatchMetrics] = []
        self.partitions: list[list[PartitionPosition]] = []

    def record(self, batch: BatchMetrics, partitions: Iterable[PartitionPosition] = ()) -> None:
        self.seen.append(batch)
        self.partitions.append(list(partitions))


@pytest.mark.parametrize(("source", "records"), [("socket", 7), ("files", 12)])
def test_the_listener_turns_batch_info_into_a_record(
    source: str, records: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The files source's lines come from its own count (Spark's numRecords is 0 for it).
    counts = _FakeAccumulator({T0 - 2000: {0: 4}, T0: {0: 5, 1: 7}})
    monkeypatch.setattr(line_counts, "_COUNTS", counts)
    keep = _Keep()
    LoggingListener(keep, source, 2000).onBatchCompleted(_Completed())
    [record] = keep.seen
    assert record.batch_time_ms == T0 and record.batch_interval_ms == 2000
    assert record.records == records
    assert (record.processing_ms, record.scheduling_delay_ms) == (120, 3)
    assert record.total_delay_ms is None  # Spark's -1
    if source == "files":
        assert counts.value == {}  # taken once; older batches' counts are dropped


def test_a_files_batch_without_counted_lines_read_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(line_counts, "_COUNTS", _FakeAccumulator({}))
    keep = _Keep()
    LoggingListener(keep, "files", 2000).onBatchCompleted(_Completed())
    assert keep.seen[0].records == 0


def test_the_listener_takes_kafka_records_and_lag_from_the_source() -> None:
    from streaming_app.sources.kafka.runtime import note_figures

    note_figures(T0, 55, 9, (("words", 0, 40, 45), ("words", 1, 15, 19)))
    keep = _Keep()
    LoggingListener(keep, "kafka", 2000).onBatchCompleted(_Completed())
    assert (keep.seen[0].records, keep.seen[0].kafka_lag) == (55, 9)
    assert keep.partitions[0] == [
        PartitionPosition("words", 0, 40, 45),
        PartitionPosition("words", 1, 15, 19),
    ]
    LoggingListener(keep, "kafka", 2000).onBatchCompleted(_Completed())
    assert (keep.seen[1].records, keep.seen[1].kafka_lag) == (None, None)  # asked once
    assert keep.partitions[1] == []


def test_known_maps_sparks_minus_one_to_none() -> None:
    assert known(-1) is None and known(0) == 0


def test_receiver_warnings_name_the_cause_in_one_line() -> None:
    trace = "java.net.ConnectException: Connection refused\n\tat java.base/X.connect(X.java:1)"
    line = receiver_warning("SocketReceiver-0", "Error connecting to 127.0.0.1:9", trace)
    assert line == (
        "receiver SocketReceiver-0: Error connecting to 127.0.0.1:9 "
        "(ConnectException: Connection refused); Spark keeps retrying"
    )
    assert (
        receiver_warning("R", "Restarting", None) == "receiver R: Restarting; Spark keeps retrying"
    )


def test_a_block_dropped_at_the_stop_is_said_plainly() -> None:
    trace = (
        "org.apache.spark.SparkException: Exception thrown in awaitResult:\n"
        "Caused by: java.util.concurrent.RejectedExecutionException: Task rejected"
    )
    line = receiver_warning("SocketReceiver-0", "Error in block pushing thread", trace)
    assert "last block interval before the stop were not stored" in line
    assert "Exception" not in line and "retrying" not in line


def test_micro_batches_over_the_interval_five_in_a_row_are_falling_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Spark queues no micro-batches, so their delay never grows: processing over the
    # interval, every time, is the structured engine's falling behind.
    recorder = MetricsRecorder(None, progress=False)

    def micro_batch(n: int, processing_ms: int) -> BatchMetrics:
        return BatchMetrics(T0 + n * 2000, 2000, 10, processing_ms, 300, processing_ms + 300,
                            None, T0 + n * 2000 + processing_ms, engine="structured")  # fmt: skip

    with caplog.at_level(logging.INFO, logger="streaming_app.common.metrics_recorder"):
        for n, took in enumerate([2500, 2600, 2400, 2700, 1900, 2100, 2200, 2300, 2400]):
            recorder.record(micro_batch(n, took))
        assert "cannot keep up" not in caplog.text and not recorder.warned  # 4 in a row
        recorder.record(micro_batch(9, 2500))
        assert caplog.text.count("cannot keep up") == 1 and recorder.warned
        assert "5 micro-batches in a row took longer than the trigger interval" in caplog.text
        recorder.record(micro_batch(10, 3000))
        recorder.record(micro_batch(11, 800))
        assert "the trigger interval again: the job keeps up" in caplog.text
    assert caplog.text.count("cannot keep up") == 1 and not recorder.warned


def test_an_idle_trigger_clears_falling_behind(caplog: pytest.LogCaptureFixture) -> None:
    # After the input stops, the structured engine runs no micro-batch that could say the
    # job keeps up: the idle trigger does.
    recorder = MetricsRecorder(None, progress=False)
    for n in range(5):
        recorder.record(BatchMetrics(T0 + n * 2000, 2000, 10, 2500, 300, 2800, None,
                                     T0 + n * 2000 + 2500, engine="structured"))  # fmt: skip
    assert recorder.warned
    with caplog.at_level(logging.INFO, logger="streaming_app.common.metrics_recorder"):
        recorder.idle()
        recorder.idle()
    assert not recorder.warned and caplog.text.count("no new input: the job keeps up") == 1


class _OutputOperation:
    """What PySpark hands onOutputOperationCompleted: its info's failureReason is a Java
    String, or null (None) when the operation succeeded."""

    def __init__(self, reason: str | None) -> None:
        self.reason = reason

    def outputOperationInfo(self) -> Any:  # noqa: N802 (PySpark's name)
        return self

    def failureReason(self) -> str | None:  # noqa: N802 (PySpark's name)
        return self.reason


def test_a_failed_output_operation_counts_a_failed_batch_and_a_succeeded_one_none() -> None:
    from streaming_app.common.prometheus import start_endpoint, stop_endpoint
    from tests.unit.common.test_prometheus import INFO, samples

    served = start_endpoint("127.0.0.1", 0, INFO)
    try:
        listener = LoggingListener(lambda _: None, "files", 2000)
        key = ("streaming_app_failures_total", (("operation", "batch"),))
        listener.onOutputOperationCompleted(_OutputOperation(None))
        assert samples(served)[key] == 0
        listener.onOutputOperationCompleted(_OutputOperation("java.io.IOException: disk full"))
        assert samples(served)[key] == 1
    finally:
        stop_endpoint()
