"""scripts/kafka-dev.sh, `streaming-app produce`, and partitions added to a running topic."""

from __future__ import annotations

import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import kafka_args
from tests.integration.harness import make_text, truth, wait_for_totals
from tests.integration.kafka_helpers import fresh_topic, read_all, send
from tests.integration.test_scripts import ROOT, script_env, wait_for_text

pytestmark = pytest.mark.timeout(300)


def produce_cli(bootstrap: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "streaming_app", "produce", "--bootstrap-servers", bootstrap, *args],
        capture_output=True,
        text=True,
        env=script_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kafka_dev_script_serves_a_broker_that_produce_fills(tmp_path: Path) -> None:
    log_path = tmp_path / "kafka-dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(ROOT / "scripts" / "kafka-dev.sh"), "0"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=script_env(),
        )
    try:
        wait_for_text(log_path, "Ctrl-C stops it", proc, timeout=120)
        match = re.search(r"on (127\.0\.0\.1:\d+);", log_path.read_text())
        assert match, log_path.read_text()
        bootstrap = match.group(1)

        text_file = tmp_path / "lines.txt"
        lines = [f"alpha beta {i}" for i in range(40)]
        text_file.write_text("\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:]) + "\n")
        out = produce_cli(
            bootstrap, "--topic", "from-file", "--file", str(text_file), "--rate", "0"
        )
        assert re.match(r"sent 40 lines to from-file in [\d.]+ s", out), out
        assert sorted(v.decode() for v in read_all(bootstrap, "from-file") if v) == sorted(lines)

        out = produce_cli(
            bootstrap, "--topic", "generated", "--count", "30", "--vocabulary", "5",
            "--words-per-line", "4", "--seed", "1", "--rate", "200",
        )  # fmt: skip
        assert out.startswith("sent 30 lines to generated"), out
        values = [v.decode().split() for v in read_all(bootstrap, "generated") if v]
        assert len(values) == 30
        assert all(
            len(words) == 4 and set(words) <= {f"w{i}" for i in range(5)} for words in values
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    port = int(bootstrap.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_produce_says_clearly_when_the_broker_is_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "streaming_app", "produce", "--topic", "t",
         "--bootstrap-servers", f"127.0.0.1:{port}", "--count", "1"],
        capture_output=True, text=True, env=script_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: cannot produce to t at 127.0.0.1:{port}"), result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 90


def test_partitions_added_while_running_are_read_from_their_earliest(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str
) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions
    from kafka.errors import IncompatibleBrokerVersion

    probe = fresh_topic("probe")
    send(kafka_bootstrap, probe, ["x"], partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_partitions({probe: NewPartitions(2)})
    except IncompatibleBrokerVersion:
        admin.close()
        pytest.skip(
            "this broker does not implement CreatePartitions (tansu 0.6); the planner's "
            "handling is unit-tested, and this test runs with KAFKA_BOOTSTRAP=<Apache Kafka>"
        )
    rng = random.Random(4)
    topic = fresh_topic()
    first = make_text(rng, 20).splitlines()
    send(kafka_bootstrap, topic, first, partitions=1)
    try:
        app = start_app(*kafka_args(dirs, kafka_bootstrap, topic))
        wait_for_totals(dirs["output"], truth(first), app)
        admin.create_partitions({topic: NewPartitions(3)})
    finally:
        admin.close()
    more = make_text(rng, 30).splitlines()
    send(kafka_bootstrap, topic, more, partitions=3)
    wait_for_totals(dirs["output"], truth(first + more), app)
    app.wait_for_log(rf"new partition {topic}:2: reading from its earliest offset 0")
    assert app.terminate() == 0
