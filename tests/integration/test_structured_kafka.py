"""`run --engine structured --source kafka` against a real broker and real Spark: exact
totals while producing, across kill -9 of the driver's process group and a restart on
the same checkpoint; no password in the checkpoint; starting_offsets=latest; values
skipped or repaired warned of per micro-batch on the driver; a broker unreachable for longer
than kafka_give_up_after ends the run in the DStream engine's line."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.batch_waits import kill_mid_batch
from tests.integration.conftest import kafka_args
from tests.integration.harness import (
    EveryPause,
    cli_totals,
    free_port,
    make_text,
    output_without_traces,
    truth,
    wait_for_totals,
)
from tests.integration.kafka_helpers import fresh_topic, send, send_raw
from tests.integration.log_lines import QUERY_RECOVERED, QUERY_STARTED, WRITTEN

pytestmark = pytest.mark.timeout(300)

# Carried through the environment into the source's options and its readers (tansu
# without authentication ignores them under security_protocol=plaintext).
SECRETS = {
    "STREAMING_APP_SASL_PLAIN_PASSWORD": "sasl-pw-5f3a9c",
    "STREAMING_APP_SSL_PASSWORD": "ssl-pw-7d21e4",
}


def structured_kafka_args(dirs: dict[str, Path], bootstrap: str, topic: str, *extra: str) -> list:
    return ["--engine", "structured", *kafka_args(dirs, bootstrap, topic, *extra)]


def lines_of(rng: random.Random, n: int) -> list[str]:
    return make_text(rng, n).splitlines()


class Producer(EveryPause):
    """Sends chunks of lines to the topic every `pause` seconds until stopped."""

    def __init__(self, bootstrap: str, topic: str, rng: random.Random, pause: float) -> None:
        super().__init__(pause)
        self.bootstrap, self.topic, self.rng = bootstrap, topic, rng

    def step(self) -> list[str]:
        chunk = lines_of(self.rng, 30)
        send(self.bootstrap, self.topic, chunk, partitions=3)
        return chunk


@pytest.mark.timeout(480)  # the final wait grows with the backlog
def test_exact_while_producing_across_kill_9_and_restart_and_no_password_in_the_checkpoint(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    rng = random.Random(23)
    topic = fresh_topic("ss")
    sent = lines_of(rng, 600)
    send(kafka_bootstrap, topic, sent, partitions=3)
    # A cap: 60 records per partition per 2 s micro-batch, so the backlog takes batches.
    args = structured_kafka_args(
        dirs, kafka_bootstrap, topic, "--max-rate-per-partition", "30", "--log-level", "debug"
    )
    first = start_app(*args, env=SECRETS)
    first.wait_for_log(QUERY_STARTED)
    producer = Producer(kafka_bootstrap, topic, random.Random(5), pause=0.7)
    producer.start()
    try:
        first.wait_for_log(WRITTEN.replace(r"(\d+)", "2"), timeout=90)
        kill_mid_batch(first, dirs["checkpoint"], lambda: None)  # mid-backlog, records arriving
        producer.wait_steps()  # records sent while it is down
        second = start_app(*args, env=SECRETS)
        second.wait_for_log(QUERY_RECOVERED)
        assert "Started new query" not in second.log()
        second.wait_for_log(WRITTEN)  # a micro-batch after the restart, records arriving
        producer.wait_steps()
    finally:
        sent += producer.stop()
    # The app reads at most 180 records a micro-batch (the cap), and on two busy cores a
    # micro-batch that writes a base and a snapshot takes 4-5 s: the wait grows with the
    # backlog (CI once read the last 400 records after 120 s, still catching up, exact).
    wait_for_totals(dirs["output"], truth(sent), second, timeout=120 + len(sent) / 20)
    assert second.terminate() == 0
    assert "Traceback" not in second.log()
    assert cli_totals(dirs["output"].parent, dirs["output"], "totals") == truth(sent)

    # Spark's offsets log holds the source's offsets in Spark's Kafka JSON.
    offsets = sorted((dirs["checkpoint"] / "offsets").iterdir(), key=lambda p: p.name)
    assert re.search(
        rf'\{{"{topic}": \{{"0": \d+, "1": \d+, "2": \d+\}}\}}$', offsets[-1].read_text()
    )
    # No file under the checkpoint (nor a log) holds a password.
    files = [p for p in dirs["checkpoint"].rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS.values():
            assert secret.encode() not in data, f"{secret} in {path}"
    for text in (first.log(), second.log()):
        for secret in SECRETS.values():
            assert secret not in text


def test_starting_offsets_latest_skips_earlier_records(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    rng = random.Random(29)
    topic = fresh_topic("ss")
    send(kafka_bootstrap, topic, ["before " + line for line in lines_of(rng, 40)], partitions=2)
    app = start_app(
        *structured_kafka_args(
            dirs, kafka_bootstrap, topic, "--starting-offsets", "latest",
            "--max-value-bytes", "1000",
        )
    )  # fmt: skip
    # The first micro-batch's end offsets are the latest at the start: once it is written,
    # records sent are past them. (A sleep of two triggers was not enough where the first
    # micro-batch was planned 4 s after the query started, CI of 5036512.)
    app.wait_for_log(WRITTEN)
    later = lines_of(rng, 30)
    send(kafka_bootstrap, topic, later, partitions=2)
    # Values that must be skipped or repaired: counted, warned of on the driver.
    odd: list[bytes | None] = [None, b"", b"w01 " * 300, b"caf\xe9 w02", b"\xff\xfe"]
    send_raw(kafka_bootstrap, topic, odd, partition=1)
    expected = truth([*later, "caf\ufffd w02", "tail"])
    expected["caf"] = expected.pop("caf\ufffd")  # U+FFFD separates words
    wait_for_totals(dirs["output"], expected, app)
    app.wait_for_log(
        r"batch_id=\d+ batch_time_ms=\d+: kafka values skipped or repaired: .*"
        r"since start: empty=2, oversize=1, replaced=2\)"
    )
    assert app.terminate() == 0
    assert "Traceback" not in app.log()


def test_a_broker_unreachable_for_kafka_give_up_after_ends_the_run_with_its_line(
    dirs: dict[str, Path], start_app: Any
) -> None:
    """Nothing listens at the bootstrap address: the planner worker retries for
    kafka_give_up_after (from today's config, through the source's options), then the query
    fails and the run ends with exit 1, its one line naming the broker, and no trace (the
    app reports the failed query itself)."""
    bootstrap = f"127.0.0.1:{free_port()}"
    app = start_app(
        *structured_kafka_args(dirs, bootstrap, fresh_topic("ss")),
        env={"STREAMING_APP_KAFKA_GIVE_UP_AFTER": "4"},
    )
    assert app.wait(timeout=120) == 1
    output_without_traces(app)
    (last,) = [line for line in app.log().splitlines() if line.startswith("Error:")]
    assert re.fullmatch(
        rf"Error: reading offsets of ss-\S+ from the Kafka broker at {re.escape(bootstrap)}: "
        r"unreachable for \d+ s \(\d+ attempts?(, the last)?: OSError: no bootstrap server "
        r"accepts connections \(.*Connection refused\)\); gave up \(kafka_give_up_after = 4 s\); "
        r"a restart resumes from the checkpoint",
        last,
    ), last
