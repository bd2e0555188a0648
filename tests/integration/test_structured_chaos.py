"""Chaos on the structured engine: kill -9 the driver's process group (Python, JVM,
workers) again and again while a producer keeps writing to Kafka; the totals stay exact.

The kills land right after a micro-batch's offsets were logged, while one runs, or at
random; the final totals equal the ground truth from everything produced, read through
`streaming-app totals` too.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.batch_waits import logged_batches, wait_all_done
from tests.integration.harness import cli_totals, truth, wait_for_totals
from tests.integration.kafka_helpers import fresh_topic, read_all
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED
from tests.integration.test_kafka_chaos import (
    BackgroundProducer,
    batch_ids,
    planned_not_committed,
    wait_to_kill,
)
from tests.integration.test_structured_kafka import structured_kafka_args


def structured_chaos(
    dirs: dict[str, Path], start_app: Any, bootstrap: str, kills: int, seed: int
) -> None:
    rng = random.Random(seed)
    topic = fresh_topic("sschaos")
    checkpoint = dirs["checkpoint"]
    producer = BackgroundProducer(bootstrap, topic, seed)
    # A cap keeps catch-up micro-batches bounded, so micro-batches run through the kills;
    # 360 lines a micro-batch against 60 produced a second keeps up with 5 s micro-batches.
    args = structured_kafka_args(dirs, bootstrap, topic, "--max-rate-per-partition", "60")
    app = start_app(*args)
    app.wait_for_log(QUERY_STARTED)
    seen: Counter[str] = Counter()
    try:
        for kill, mode in zip(range(kills), itertools.cycle(["after-log", "mid-batch", "random"])):
            mode = wait_to_kill(mode, checkpoint, app, rng)
            if planned_not_committed(checkpoint):
                seen["killed with a planned, uncommitted micro-batch"] += 1
            seen[mode] += 1
            planned = bool(batch_ids(checkpoint, "offsets"))
            app.kill9()
            time.sleep(rng.uniform(0, 3))  # down time: the producer goes on
            app = start_app(*args)
            app.wait_for_log(QUERY_RECOVERED if planned else QUERY_STARTED)
            if planned:
                assert "Started new query" not in app.log(), f"kill {kill + 1}: a new query"
    finally:
        sent = producer.stop()
    in_topic = sorted(v.decode() for v in read_all(bootstrap, topic) if v is not None)
    assert in_topic == sorted(sent)
    expected = truth(sent)
    # The capped app catches up on what was produced while it was down at about 150 lines
    # a second: many kills leave a backlog of minutes (27 kills: about 30,000 lines).
    wait_for_totals(dirs["output"], expected, app, timeout=240 + len(sent) / 150)
    wait_all_done(app, logged_batches(checkpoint))  # a double count would show now
    wait_for_totals(dirs["output"], expected, app, timeout=5)
    assert app.terminate() == 0
    assert cli_totals(dirs["output"].parent, dirs["output"], "totals") == expected
    assert planned_not_committed(checkpoint) == []
    assert seen["after-log"] >= 1, seen
    assert seen["killed with a planned, uncommitted micro-batch"] >= 1, seen
    print(f"structured chaos: {kills} kills, {len(sent)} lines, {dict(seen)}")


# CI's structured kill -9 runs: test_structured_kafka.py, test_structured_postgres.py.
@pytest.mark.slow  # 321 s in CI of 5036512
@pytest.mark.timeout(900)
def test_kill_9_four_times_while_producing_exact_totals(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    # Each way a kill lands once, after a logged plan twice.
    structured_chaos(dirs, start_app, kafka_bootstrap, kills=4, seed=2027)


# 27 kills in three runs of nine (three of each way a kill lands in each), each in a share
# of CI's rotation of its own (tests/slow_shares.py): one run of 27 took 16 minutes, which
# made its share's CI run 52 minutes.
@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed", [8, 9, 10])
def test_kill_9_nine_times_while_producing_exact_totals(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str, seed: int
) -> None:
    structured_chaos(dirs, start_app, kafka_bootstrap, kills=9, seed=seed)
