"""Kafka with SASL/SCRAM over TLS, against an endpoint that demands it: tansu behind the
tests' SCRAM proxy behind stunnel (tests/integration/kafka_sasl.py; tansu 0.6 keeps no
SCRAM credentials of its own). Both engines read exact totals with SCRAM-SHA-256, the
password given only in the environment; every connection (the driver's planner, the
executors' reads, the group commits) authenticates with the proxy, and no file of the
checkpoint, no output and no log holds the password. `streaming-app produce` sends with
SCRAM-SHA-512. A wrong password is one line, exit 2, and writes nothing."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming_app.tools.produce import produce
from tests.integration.conftest import kafka_args
from tests.integration.harness import (
    assert_no_password_at_rest,
    text_lines,
    truth,
    wait_for_totals,
)
from tests.integration.kafka_helpers import committed_offsets, fresh_topic
from tests.integration.kafka_sasl import SaslBroker, sasl_broker
from tests.integration.kafka_tls import require_tools

pytestmark = pytest.mark.timeout(240)

USER, PASSWORD = "counter", "scram-pw-app-7a3c19"
ENV = {"STREAMING_APP_SASL_PLAIN_PASSWORD": PASSWORD}


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    """tansu behind the SCRAM proxy behind stunnel: only USER with PASSWORD gets in."""
    require_tools("openssl", "stunnel")
    with sasl_broker(tmp_path_factory.mktemp("kafka-sasl"), USER, PASSWORD) as broker:
        yield broker


@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_exact_over_sasl_ssl_no_password_at_rest(
    engine: str, dirs: dict[str, Path], start_app: Any, sasl: SaslBroker, tmp_path: Path
) -> None:
    rng = random.Random(47)
    topic, group = fresh_topic(f"sasl-{engine}"), fresh_topic("sasl-group")
    sent = text_lines(rng, 240)
    produce(sasl.connection(PASSWORD), topic, iter(sent), None, 0, 3)
    config = sasl.ini(tmp_path / "kafka-sasl.ini", "SCRAM-SHA-256")
    before = len(sasl.proxy_lines("authenticated"))
    app = start_app(
        "--config", str(config), "--engine", engine,
        *kafka_args(dirs, sasl.bootstrap, topic, "--group-id", group),
        env=ENV,
    )  # fmt: skip
    wait_for_totals(dirs["output"], truth(sent), app, timeout=120)
    more = text_lines(rng, 60)
    produce(sasl.connection(PASSWORD), topic, iter(more), None, 0, 3)
    wait_for_totals(dirs["output"], truth(sent + more), app)
    assert app.terminate() == 0
    # The group's commits went through SASL too: some offset of the topic is committed.
    assert any(committed_offsets(sasl.connection(PASSWORD), group, topic).values())
    authenticated = sasl.proxy_lines("authenticated")[before:]
    assert authenticated and all(f"user={USER} mechanism=SCRAM-SHA-256" in a for a in authenticated)
    # Nor the output; the topic is found in the checkpoint.
    at_rest = [dirs["checkpoint"], dirs["output"]]
    assert_no_password_at_rest(at_rest, [PASSWORD], topic, app, found_in=str(dirs["checkpoint"]))


@pytest.mark.timeout(90)
def test_produce_with_scram_sha_512_and_the_password_from_the_environment(
    start_app: Any, sasl: SaslBroker, tmp_path: Path
) -> None:
    from kafka import KafkaConsumer

    topic = fresh_topic("sasl-512")
    corpus = tmp_path / "corpus.txt"
    lines = text_lines(random.Random(53), 50)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = sasl.ini(tmp_path / "kafka-sasl.ini", "SCRAM-SHA-512")
    sender = start_app(
        "--config", str(config), "--bootstrap-servers", sasl.bootstrap, "--topic", topic,
        "--file", str(corpus), "--rate", "0", "--partitions", "2",
        env=ENV, command="produce",
    )  # fmt: skip
    assert sender.wait(timeout=60) == 0, sender.log()
    assert PASSWORD not in sender.log()
    kwargs = sasl.connection(PASSWORD, "SCRAM-SHA-512").kafka_kwargs()
    consumer = KafkaConsumer(
        topic, **kwargs, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    try:
        assert sorted(m.value.decode() for m in consumer) == sorted(lines)
    finally:
        consumer.close()
    assert sasl.proxy_lines(f"authenticated user={USER} mechanism=SCRAM-SHA-512")


WRONG_PASSWORD = (
    r"Error: sasl_plain_username, sasl_plain_password: the Kafka broker at 127\.0\.0\.1:\d+ "
    r"refused user 'counter' with this password \(SCRAM-SHA-256\)"
)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_a_wrong_password_is_one_line_exit_2_and_writes_nothing(
    engine: str, dirs: dict[str, Path], start_app: Any, sasl: SaslBroker, tmp_path: Path
) -> None:
    """Not kafka-python's bootstrap retries (it takes a refusal for a broker not ready),
    then the app's until kafka_give_up_after, exit 1, and a supervisor's for ever."""
    config = sasl.ini(tmp_path / "kafka-sasl.ini", "SCRAM-SHA-256")
    app = start_app(
        "--config", str(config), "--engine", engine,
        *kafka_args(dirs, sasl.bootstrap, fresh_topic("never")),
        env={"STREAMING_APP_SASL_PLAIN_PASSWORD": "not-the-password"},
    )  # fmt: skip
    assert app.wait(timeout=60) == 2, app.log()[-3000:]
    lines = app.log().strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(WRONG_PASSWORD, lines[0]), app.log()[-3000:]
    assert not dirs["checkpoint"].exists() and not dirs["output"].exists()


@pytest.mark.timeout(60)
def test_produce_with_a_wrong_user_is_one_line_exit_2(
    start_app: Any, sasl: SaslBroker, tmp_path: Path
) -> None:
    config = sasl.ini(tmp_path / "kafka-sasl.ini", "SCRAM-SHA-512", user="nobody")
    app = start_app(
        "--config", str(config), "--bootstrap-servers", sasl.bootstrap, "--topic", "never",
        "--count", "1",
        env=ENV, command="produce",
    )  # fmt: skip
    assert app.wait(timeout=50) == 2, app.log()
    lines = app.log().strip().splitlines()
    expected = WRONG_PASSWORD.replace("counter", "nobody").replace("256", "512")
    assert len(lines) == 1 and re.fullmatch(expected, lines[0]), lines
