"""The latency benchmark's pure parts: percentiles, probe bookkeeping, pacing and the report."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench.latency import readers
from bench.latency.latency import SUSTAINED, parse_sustained
from bench.latency.load import LINES_PER_RECORD, due, record_pool
from bench.latency.probes import (
    PROBE_END,
    PROBE_PREFIX,
    ProbeBook,
    batch_figures,
    drained,
    latency_figures,
    latency_report,
    met,
    percentile,
    probe_word,
    probe_words,
    target_s,
)
from bench.latency.readers import files_reader, peer_reader
from streaming_app.jobs.text import count_words
from streaming_app.sinks import files_layout
from streaming_app.sinks.files_layout import DELTA, read_totals, totals_name
from tests.unit.sinks.test_files_layout import make_link


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99  # the second largest of 100
    assert percentile(values, 1.0) == 100
    assert percentile([3.0], 0.99) == 3.0
    assert percentile(list(reversed(values)), 0.5) == 50  # order does not matter
    assert math.isnan(percentile([], 0.5))


def test_probe_words_are_single_words_of_the_apps_tokenizer_and_sort_in_their_range() -> None:
    word = probe_word(123)
    assert word == "zzprobe000123"
    assert dict(count_words([f"w1 {word} w2"])) [word] == 1  # fmt: skip
    assert PROBE_PREFIX <= word < PROBE_END
    assert probe_words(["w1", word, "zzprob", "zzprobe7"]) == {word, "zzprobe7"}


def test_a_probe_counts_from_its_first_sight_only() -> None:
    book = ProbeBook()
    book.sent_at("zzprobe000000", 1_000)
    book.sent_at("zzprobe000001", 1_250)
    book.saw(["zzprobe000000"], 3_000)
    book.saw(["zzprobe000000"], 5_000)  # still there later: not a new sight
    assert book.latencies_ms() == [2_000]
    assert book.missing() == ["zzprobe000001"] and not book.all_seen()
    book.saw(["zzprobe000001", "zzprobe999999"], 4_250)  # one never sent: no latency
    assert book.latencies_ms() == [2_000, 3_000] and book.all_seen()
    figures = latency_figures(book)
    assert figures["probes"] == 2 and figures["missing"] == 0
    assert figures["p50_s"] == 2.0 and figures["p99_s"] == 3.0 and figures["max_s"] == 3.0


def test_target_and_whether_met() -> None:
    assert target_s(2, 0.9) == 3.8
    row: dict[str, Any] = {"probes": 10, "p99_s": 3.8, "target_s": 3.8}
    assert met(row)
    assert not met({**row, "p99_s": 3.81})
    assert not met({**row, "probes": 0, "p99_s": float("nan")})


def test_batch_figures_keep_up_unless_the_delay_grows() -> None:
    steady = batch_figures([1.0, 3.0, 2.0], [0.0, 0.3, 0.4], 2)
    assert steady["median_batch_s"] == 2.0 and steady["kept_up"] and steady["max_delay_s"] == 0.4
    assert not batch_figures([1.0, 1.0], [0.0, 0.6], 2)["kept_up"]  # the delay grows
    assert batch_figures([1.0], [], 2)["kept_up"]  # no delays known (the peer): the median
    assert not batch_figures([2.1, 2.2, 1.0], [], 2)["kept_up"]  # over the interval


def test_pacing_sends_what_is_due_and_records_hold_lines_of_ten_words() -> None:
    assert due(1.0, 100, 0) == 100
    assert due(1.0, 100, 100) == 0
    assert due(1.0, 100, 150) == 0  # ahead: nothing, never negative
    assert due(0.005, 100, 0) == 0
    record = record_pool(2)[0].decode()
    assert len(record.split("\n")) == LINES_PER_RECORD
    assert all(len(line.split()) == 10 for line in record.split("\n"))


def test_the_peer_reader_reads_complete_deltas_once(tmp_path: Any) -> None:
    read = peer_reader(tmp_path)
    delta = tmp_path / "delta-3"
    delta.mkdir()
    (delta / "part-00000").write_text("w1\t5\nzzprobe000004\t1\n")
    assert read() is None  # no _SUCCESS yet: Spark is still writing it
    (delta / "_SUCCESS").write_text("")
    assert read() == {"zzprobe000004"}
    assert read() is None  # read already


def test_the_report_has_a_row_per_run() -> None:
    row = {
        "engine": "dstream", "sink": "files", "words_per_s": 500_000, "share": 0.5,
        "produced_words_per_s": 499_800, "probes": 200, "missing": 0, "p50_s": 1.9,
        "p99_s": 3.1, "max_s": 3.3, "median_batch_s": 0.9, "target_s": 3.8,
        "max_delay_s": 0.1, "kept_up": True,
    }  # fmt: skip
    found = {"sustained": {"dstream": 1_000_000}, "seconds": 60, "warmup_s": 20,
             "probe_every_s": 0.25, "poll_s": 0.1, "interval_s": 2,
             "rows": [row, {**row, "p99_s": 4.0}]}  # fmt: skip
    lines = latency_report(found)
    assert lines[-2] == (
        "| dstream | files | 2 s | 500,000 (50%) | 499,800 | 200 (0) | 1.90 s | 3.10 s | 3.30 s | "
        "0.90 s | 3.80 s | yes | yes (0.10 s) |"
    )
    assert "| 4.00 s |" in lines[-1] and "| no |" in lines[-1]


def test_the_sustained_rate_is_given_for_every_engine_or_per_engine() -> None:
    assert parse_sustained("") == dict.fromkeys(("dstream", "structured", "peer"), SUSTAINED)
    assert parse_sustained("400000,dstream=1000000") == {
        "dstream": 1_000_000, "structured": 400_000, "peer": 400_000,
    }  # fmt: skip
    assert parse_sustained("dstream=1000000,400000")["dstream"] == 1_000_000  # in any order
    for wrong in ("flink=5", "fast", "dstream=0"):
        with pytest.raises(SystemExit):
            parse_sustained(wrong)


def test_the_files_reader_sees_what_totals_prints_and_parses_each_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []
    original = files_layout.read_totals_dir

    def spy(path: str) -> dict[str, Any]:
        parsed.append(path)
        return original(path)

    monkeypatch.setattr(readers, "read_totals_dir", spy)
    make_link(tmp_path, totals_name(1000), {"part-00000": "a\t1\n"}, 0)
    read = files_reader(tmp_path)
    assert read() == set()
    assert read() is None  # nothing renamed into place since: not read again
    make_link(tmp_path, totals_name(2000, DELTA), {"part-00000": "zzprobe000001\t1\n"}, 1000)
    assert read() == {"zzprobe000001"}
    make_link(tmp_path, totals_name(3000, DELTA), {"part-00000": "zzprobe000002\t1\n"}, 2000)
    assert read() == {"zzprobe000001", "zzprobe000002"}
    assert len(parsed) == len(set(parsed)) == 3  # each directory parsed once
    # What `streaming-app totals` prints, read afresh.
    assert probe_words(read_totals(str(tmp_path))[1]) == {"zzprobe000001", "zzprobe000002"}


def test_a_run_is_drained_once_its_last_batch_starts_on_time() -> None:
    assert drained([4_000, 2_000, 499])
    assert not drained([0, 0, 500])
    assert drained([4_000, None])  # unknown: no delay to wait for
    assert not drained([])
