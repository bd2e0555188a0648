"""The Kafka source against a real broker and real Spark: exact totals, odd values, stops."""

from __future__ import annotations

import random
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import kafka_args
from tests.integration.harness import make_text, truth, wait_for, wait_for_totals
from tests.integration.kafka_helpers import (
    assert_log_contiguous,
    committed_offsets,
    end_offsets,
    fresh_topic,
    log_entries,
    read_all,
    send,
    send_raw,
)

pytestmark = pytest.mark.timeout(420)


def wait_for_batches(checkpoint: Path, n: int, app: Any, timeout: float = 90) -> None:
    """Wait until the commit log holds n batches."""

    def committed() -> bool:
        return len(log_entries(checkpoint, "commits")) >= n

    wait_for(f"{n} batches in the commit log", committed, timeout, app, 0.1)


def group_at(bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> bool:
    """Whether the group's committed offsets of `topic` are `ends`."""
    return bool(committed_offsets(bootstrap, group, topic) == ends)


def lines_of(rng: random.Random, n: int) -> list[str]:
    return make_text(rng, n).splitlines()


def test_exact_totals_odd_values_and_group_commit(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    rng = random.Random(7)
    topic, group = fresh_topic(), fresh_topic("group")
    corpus = lines_of(rng, 300)
    send(kafka_bootstrap, topic, corpus, partitions=3)
    # Values that must be skipped or repaired, never crash the app.
    odd: list[bytes | None] = [None, b"", b"w01 " * 300, b"caf\xe9 w02", b"\xff\xfe"]
    send_raw(kafka_bootstrap, topic, odd, partition=1)
    expected = truth([*corpus, "caf\ufffd w02", "\ufffd\ufffd", "tail"])
    expected["caf"] = expected.pop("caf\ufffd")  # U+FFFD separates words
    del expected["\ufffd\ufffd"]

    app = start_app(
        *kafka_args(dirs, kafka_bootstrap, topic, "--group-id", group, "--max-value-bytes", "1000")
    )
    wait_for_totals(dirs["output"], expected, app)
    log = app.wait_for_log(r"kafka values skipped or repaired: ([^(]*)\(").group(1)
    assert "empty=2" in log and "oversize=1" in log and "replaced=2" in log
    # The group sees the processed offsets: lag tools show no lag.
    ends = end_offsets(kafka_bootstrap, topic)
    at_end = partial(group_at, kafka_bootstrap, group, topic, ends)
    wait_for("the group's offsets at the end", at_end, 30, app, 0.5)
    assert app.terminate() == 0
    assert_log_contiguous(dirs["checkpoint"])
    assert "Traceback" not in app.log()


def test_sigterm_mid_stream_commits_the_batch_in_flight_and_restart_rereads_nothing(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    rng = random.Random(11)
    topic = fresh_topic()
    # A cap makes the backlog take many batches (80 records per partition each), so the
    # stop lands mid-stream.
    args = kafka_args(dirs, kafka_bootstrap, topic, "--max-rate-per-partition", "40")
    sent = lines_of(rng, 2000)
    send(kafka_bootstrap, topic, sent, partitions=2)
    app = start_app(*args)
    wait_for_batches(dirs["checkpoint"], 2, app)
    assert app.terminate() == 0
    assert "taking no new Kafka records" in app.log()
    assert "no state checkpoint covered the last batch" not in app.log()
    planned = log_entries(dirs["checkpoint"], "offsets")
    committed = log_entries(dirs["checkpoint"], "commits")
    assert set(planned) == set(committed), "a planned batch was left uncommitted"
    read_so_far = sum(e - s for entry in planned.values() for _, _, s, e in entry["ranges"])
    assert 0 < read_so_far < len(sent) - 200, "the stop should land mid-backlog"

    more = lines_of(rng, 50)
    send(kafka_bootstrap, topic, more, partitions=2)
    app = start_app(*args)
    app.wait_for_log(r"Recovered streaming context")
    wait_for_totals(dirs["output"], truth(sent + more), app)
    # Spark re-runs the batch at its checkpoint time on every restart; after a graceful
    # stop such a re-run reads no records.
    replays = re.findall(
        r"replaying batch_time_ms=\d+ from the offset log: (\d+) records", app.log()
    )
    assert all(n == "0" for n in replays), replays
    assert app.terminate() == 0
    assert_log_contiguous(dirs["checkpoint"])


def test_a_topic_created_while_running_is_read_from_its_earliest_offset(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    rng = random.Random(3)
    first, later = fresh_topic(), fresh_topic()
    texts = lines_of(rng, 40)
    send(kafka_bootstrap, first, texts, partitions=2)
    app = start_app(
        *kafka_args(dirs, kafka_bootstrap, f"{first},{later}", "--starting-offsets", "latest")
    )
    app.wait_for_log(r"Started new streaming context")
    # starting_offsets=latest: what was there before the first batch is not counted.
    wait_for_batches(dirs["checkpoint"], 1, app)
    more = lines_of(rng, 30)
    send(kafka_bootstrap, first, more, partitions=2)
    wait_for_totals(dirs["output"], truth(more), app)
    newer = lines_of(rng, 25)
    send(kafka_bootstrap, later, newer, partitions=2)
    wait_for_totals(dirs["output"], truth(more + newer), app)
    app.wait_for_log(rf"new partition {later}:0: reading from its earliest offset 0")
    assert app.terminate() == 0
    assert_log_contiguous(dirs["checkpoint"])


def test_read_back_helper_sees_what_was_sent(kafka_bootstrap: str) -> None:
    topic = fresh_topic()
    lines = [f"line {i}" for i in range(25)]
    assert send(kafka_bootstrap, topic, lines, partitions=3) == 25
    assert sorted(v.decode() for v in read_all(kafka_bootstrap, topic) if v) == sorted(lines)
