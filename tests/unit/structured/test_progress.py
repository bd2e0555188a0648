"""A micro-batch's progress event as the metrics record: fields, trigger delay, Kafka lag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.metrics_record import read_metrics
from streaming_app.common.metrics_recorder import MetricsRecorder
from streaming_app.structured.progress import (
    Trigger,
    batch_metrics,
    kafka_lag,
    parse_timestamp,
    trigger_delay,
)
from streaming_app.tools.report import summarize

T0 = 1_795_000_000_000  # a multiple of 1000 ms


def progress(batch_id: int, start: str, duration: int, rows: int, **extra: Any) -> dict[str, Any]:
    """Progress JSON as Spark 4's StreamingQueryProgress.json has it (the parts we read)."""
    return {
        "id": "q",
        "runId": "r",
        "timestamp": start,
        "batchId": batch_id,
        "batchDuration": duration + 3,
        "numInputRows": rows,
        "durationMs": {"addBatch": duration - 50, "triggerExecution": duration},
        "stateOperators": [{"operatorName": "transformWithStateExec", "numRowsTotal": 7}],
        "sources": [{"description": "FileStreamSource", "endOffset": {"logOffset": batch_id}}],
        **extra,
    }


def test_the_timestamp_is_epoch_ms() -> None:
    assert parse_timestamp("2026-11-24T20:01:39.910Z") == 1_795_550_499_910
    with pytest.raises(ValueError):
        parse_timestamp("yesterday")


def test_a_record_has_the_dstream_fields_and_says_which_engine(tmp_path: Path) -> None:
    event = progress(4, "2026-11-24T20:01:39.910Z", 750, 12)
    record = batch_metrics(event, 1_795_550_499_905, 1000, None, 1_795_550_500_700, kafka=False)
    assert record.batch_time_ms == 1_795_550_499_905  # the offsets log's, not the trigger's
    assert (record.records, record.processing_ms) == (12, 750)
    assert (record.scheduling_delay_ms, record.total_delay_ms) == (0, 750)
    assert (record.kafka_lag, record.engine, record.batch_id) == (None, "structured", 4)
    fallback = batch_metrics(event, None, 1000, None, 0, kafka=False)
    assert fallback.batch_time_ms == 1_795_550_499_910
    # Through the DStream engine's recorder to the file, and back through report's reader.
    path = tmp_path / "metrics.jsonl"
    MetricsRecorder(str(path), progress=False).record(record)
    line = json.loads(path.read_text())
    assert line["engine"] == "structured" and line["batch_id"] == 4
    batches, skipped = read_metrics(path)
    assert skipped == 0 and batches == [record]
    assert summarize(batches).engines == ("structured",)


def test_a_trigger_is_late_only_after_a_micro_batch_that_overran_its_interval() -> None:
    interval = 1000
    on_time = Trigger(T0, 300)
    assert trigger_delay(Trigger(T0 + 1002, 200), interval, on_time) == 0
    assert trigger_delay(Trigger(T0 + 1002, 200), interval, None) == 0  # the run's first
    # 2.5 s from T0: the next trigger was due at T0 + 1 s and runs when it ends.
    overran = Trigger(T0, 2500)
    assert trigger_delay(Trigger(T0 + 2503, 100), interval, overran) == 1503
    # An idle trigger ran at T0 + 2.5 s; this one waited for T0 + 3 s: on time.
    assert trigger_delay(Trigger(T0 + 3001, 100), interval, overran) == 0


def test_kafka_lag_is_what_the_broker_had_beyond_the_end_offsets() -> None:
    source = {
        "endOffset": {"t": {"0": 40, "1": 7}},
        "latestOffset": json.dumps({"t": {"0": 100, "1": 7, "2": 5}}),  # as text, too
    }
    assert kafka_lag({"sources": [source]}) == 60  # a new partition's position is its end
    assert kafka_lag({"sources": [{"endOffset": {"t": {"0": 1}}, "latestOffset": None}]}) is None
    assert kafka_lag({"sources": []}) is None
    event = progress(0, "2026-11-24T20:01:39.910Z", 10, 0, sources=[source])
    assert batch_metrics(event, None, 1000, None, 0, kafka=True).kafka_lag == 60


def test_the_listener_records_each_micro_batch_and_logs_sparks_progress_at_debug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from types import SimpleNamespace

    from streaming_app.common.fs import LocalFs
    from streaming_app.settings.loading import load_config
    from streaming_app.structured.listener import ProgressListener

    given = {"source": "files", "input_dir": "/data/in", "checkpoint_dir": str(tmp_path)}
    recorded: list[Any] = []
    recorder = SimpleNamespace(record=lambda batch, partitions=(): recorded.append(batch))
    listener = ProgressListener(load_config(None, {}, given, ()), LocalFs(), recorder)  # type: ignore[arg-type]

    def event(payload: dict[str, Any]) -> Any:
        return SimpleNamespace(progress=SimpleNamespace(json=json.dumps(payload)))

    caplog.set_level("DEBUG", logger="streaming_app.structured.listener")
    listener.onQueryProgress(event(progress(4, "2026-11-24T20:01:39.910Z", 750, 12)))
    assert [(r.batch_id, r.records, r.processing_ms) for r in recorded] == [(4, 12, 750)]
    assert recorded[0].batch_time_ms == 1_795_550_499_910  # no offsets log: the trigger's
    logged = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith("micro-batch progress (Spark's): ") and '"addBatch": 700' in m for m in logged
    )
    # An event without what the record needs is logged, recorded nowhere, and raises nothing.
    listener.onQueryProgress(event({"batchId": 5}))
    assert len(recorded) == 1


def test_the_state_keys_words_and_checkpoint_time_of_a_micro_batch() -> None:
    from streaming_app.structured.progress import checkpoint_ms, state_keys

    event = progress(
        4, "2026-11-24T20:01:39.910Z", 750, 12,
        durationMs={"triggerExecution": 750, "walCommit": 21, "commitOffsets": 9},
        stateOperators=[{"numRowsTotal": 7, "commitTimeMs": 40}],
    )  # fmt: skip
    record = batch_metrics(event, None, 1000, None, 0, kafka=False, words=96)
    assert (record.words, record.state_keys) == (96, 7)
    assert checkpoint_ms(event) == 21 + 9 + 40
    bare = progress(5, "2026-11-24T20:01:39.910Z", 750, 12, stateOperators=[])
    assert (state_keys(bare), checkpoint_ms(bare)) == (None, None)
    assert batch_metrics(bare, None, 1000, None, 0, kafka=False).words is None
