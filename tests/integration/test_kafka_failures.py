"""Broker outages and offsets that vanish: retries with warnings, exact catch-up, policies."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming_app.tools.dev_broker import DevBroker, free_port
from tests.integration.conftest import kafka_args
from tests.integration.harness import make_text, truth, wait_for_totals
from tests.integration.kafka_helpers import TcpProxy, assert_log_contiguous, fresh_topic, send

pytestmark = [
    pytest.mark.timeout(420),
    pytest.mark.skipif(
        bool(os.environ.get("KAFKA_BOOTSTRAP")),
        reason="stops and restarts its own broker; cannot do that to KAFKA_BOOTSTRAP",
    ),
]


@pytest.fixture
def broker_log(tmp_path: Path) -> Iterator[Any]:
    with open(tmp_path / "tansu.log", "ab") as log:
        yield log


def count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


def test_broker_unreachable_at_start_and_mid_run_then_exact_catch_up(
    dirs: dict[str, Path], start_app: Any, broker_log: Any
) -> None:
    rng = random.Random(5)
    proxy_port = free_port()
    broker = DevBroker(log=broker_log, advertised_port=proxy_port).start()
    proxy = TcpProxy(broker.port, proxy_port)  # down: the broker is unreachable
    try:
        topic = fresh_topic()
        app = start_app(*kafka_args(dirs, broker.bootstrap, topic))
        app.wait_for_log(
            r"reading offsets of \S+ from the Kafka broker at \S+ failed \(attempt 1\): "
            r".*retrying in 1 s"
        )
        assert not (dirs["checkpoint"] / "offsets").exists() or not os.listdir(
            dirs["checkpoint"] / "offsets"
        ), "a batch was planned while the broker was unreachable"

        proxy.up()
        first = make_text(rng, 60).splitlines()
        send(broker.bootstrap, topic, first)
        wait_for_totals(dirs["output"], truth(first), app)
        app.wait_for_log(r"succeeded after \d+ failed attempts")

        proxy.down()
        failures = count(r"failed \(attempt 1\)", app.log())
        app.wait_for_log(rf"(?s)(failed \(attempt 1\).*){{{failures + 1}}}", timeout=60)
        app.wait_for_log(r"failed \(attempt 2\)", timeout=60)
        proxy.up()
        second = make_text(rng, 60).splitlines()
        send(broker.bootstrap, topic, second)
        wait_for_totals(dirs["output"], truth(first + second), app)
        assert app.terminate() == 0
        assert_log_contiguous(dirs["checkpoint"])
    finally:
        proxy.down()
        broker.stop()


def test_offsets_gone_fail_with_exit_4_then_earliest_goes_on(
    dirs: dict[str, Path], start_app: Any, broker_log: Any
) -> None:
    rng = random.Random(9)
    port = free_port()
    broker = DevBroker(port, log=broker_log).start()
    try:
        topic = fresh_topic()
        first = make_text(rng, 60).splitlines()
        send(broker.bootstrap, topic, first)
        app = start_app(*kafka_args(dirs, broker.bootstrap, topic))
        wait_for_totals(dirs["output"], truth(first), app)

        # The broker loses its data (memory storage): offsets start again from 0.
        broker.stop()
        broker = DevBroker(port, log=broker_log).start()
        second = make_text(rng, 6).splitlines()
        send(broker.bootstrap, topic, second)
        assert app.wait(timeout=120) == 4
        error = app.log().strip().splitlines()[-1]
        assert error.startswith("Error: offset ") and "out of range" in error, error
        assert "on_offset_out_of_range=earliest" in error

        app = start_app(
            *kafka_args(dirs, broker.bootstrap, topic), "--on-offset-out-of-range", "earliest"
        )
        app.wait_for_log(r"out of range: the broker's latest is \d+ .*continuing from the earliest")
        wait_for_totals(dirs["output"], truth(first + second), app)
        assert app.terminate() == 0
    finally:
        broker.stop()
