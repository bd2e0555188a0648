"""Kafka over TLS with client certificates, against a broker that demands them (tansu behind
stunnel, tests/integration/kafka_tls.py): both engines read exact totals, with the key's
password given only in the environment; it reaches the driver's planner, the executors'
reads, the group commits and `produce`, a restart takes a new one, and no file of the
checkpoint holds it (nor a SASL password given alongside), read decoded. A wrong key
password or a missing TLS file is one line, exit 2, and writes nothing."""

from __future__ import annotations

import random
import socket
import ssl
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming_app.tools.produce import produce
from tests.integration.conftest import kafka_args
from tests.integration.harness import (
    assert_no_password_at_rest,
    free_port,
    output_without_traces,
    text_lines,
    truth,
    wait_for,
    wait_for_totals,
)
from tests.integration.kafka_helpers import committed_offsets, end_offsets, fresh_topic
from tests.integration.kafka_tls import (
    TlsBroker,
    TlsFiles,
    make_tls_files,
    misnamed_tunnel,
    require_tools,
    tls_broker,
)
from tests.integration.log_lines import QUERY_STARTED

pytestmark = pytest.mark.timeout(240)

KEY_PASSWORD = "tls-key-pw-4c81e7"
ROTATED_PASSWORD = "tls-key-pw-rotated-9b02d5"
# A SASL password too (unused under security_protocol=ssl): it must not be at rest either.
SASL_PASSWORD = "sasl-pw-unused-61f0aa"
ENV = {
    "STREAMING_APP_SSL_PASSWORD": KEY_PASSWORD,
    "STREAMING_APP_SASL_PLAIN_PASSWORD": SASL_PASSWORD,
}
DSTREAM_RECOVERED = r"Recovered streaming context from checkpoint"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    """tansu behind stunnel, which demands a client certificate of the test CA."""
    require_tools("openssl", "stunnel")
    with tls_broker(tmp_path_factory.mktemp("kafka-tls"), KEY_PASSWORD) as broker:
        yield broker


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """Certificates and an encrypted client key, without a broker."""
    require_tools("openssl")
    return make_tls_files(tmp_path_factory.mktemp("tls-files"), KEY_PASSWORD)


def _api_versions_answered(broker: TlsBroker, context: ssl.SSLContext) -> bool:
    """Whether the broker answers an ApiVersions request over TLS with this context."""
    host, port = broker.bootstrap.rsplit(":", 1)
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    try:
        with (
            socket.create_connection((host, int(port)), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=host) as conn,
        ):
            conn.sendall(struct.pack(">i", len(body)) + body)
            return len(conn.recv(4)) == 4
    except (ssl.SSLError, ConnectionError):
        return False


def _wait_group_reached(
    tls: TlsBroker, group: str, topic: str, ends: dict[int, int] | None = None
) -> None:
    """Wait until the group's committed offsets reach `ends` (default: the topic's end)."""
    connection = tls.connection()
    ends = ends or end_offsets(connection, topic)
    committed: dict[int, int | None] = {}

    def reached() -> bool:
        nonlocal committed
        committed = committed_offsets(connection, group, topic)
        return all((committed.get(p) or 0) >= end for p, end in ends.items())

    what = "the group's offsets at the ends"
    wait_for(what, reached, 30, pause=0.5, detail=lambda: f"committed {committed}, ends {ends}")


PASSWORDS = [KEY_PASSWORD, ROTATED_PASSWORD, SASL_PASSWORD]


def test_broker_demands_a_client_certificate(tls: TlsBroker) -> None:
    context = ssl.create_default_context(cafile=str(tls.files.cafile))
    assert not _api_versions_answered(tls, context)
    context.load_cert_chain(tls.files.certfile, tls.files.keyfile, KEY_PASSWORD)
    assert _api_versions_answered(tls, context)


def test_dstream_exact_over_tls_across_a_restart_no_password_in_the_checkpoint(
    dirs: dict[str, Path], start_app: Any, tls: TlsBroker, tmp_path: Path
) -> None:
    rng = random.Random(41)
    topic, group = fresh_topic("tls"), fresh_topic("tls-group")
    config = tls.ini(tmp_path / "kafka-tls.ini")
    first_lines = text_lines(rng, 240)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(first_lines) + "\n", encoding="utf-8")
    # `streaming-app produce`: the TLS settings from the config file, the password from env.
    sender = start_app(
        "--config", str(config), "--bootstrap-servers", tls.bootstrap, "--topic", topic,
        "--file", str(corpus), "--rate", "0", "--partitions", "3",
        env=ENV, command="produce",
    )  # fmt: skip
    assert sender.wait(timeout=60) == 0, sender.log()

    args = ["--config", str(config), *kafka_args(dirs, tls.bootstrap, topic, "--group-id", group)]
    first = start_app(*args, env=ENV)
    wait_for_totals(dirs["output"], truth(first_lines), first)
    _wait_group_reached(tls, group, topic)  # the group commits went over TLS too
    assert first.terminate() == 0

    # The restart rebuilds the graph from the checkpoint, which holds no password: the
    # executors' reads get it from this run's settings. The key is re-encrypted with a new
    # password, so reading with the old one would fail.
    rotated_key = tmp_path / "client-rotated.key"
    subprocess.run(
        ["openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(tls.files.keyfile),
         "-passin", f"pass:{KEY_PASSWORD}", "-passout", f"pass:{ROTATED_PASSWORD}",
         "-out", str(rotated_key)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    _tls_ini(config, tls.files, ssl_keyfile=str(rotated_key))
    more = text_lines(rng, 150)
    produce(tls.connection(), topic, iter(more), None, 0, 3)
    second = start_app(*args, env={**ENV, "STREAMING_APP_SSL_PASSWORD": ROTATED_PASSWORD})
    second.wait_for_log(DSTREAM_RECOVERED)
    wait_for_totals(dirs["output"], truth(first_lines + more), second)
    assert second.terminate() == 0
    # Spark's own checkpoint files (lz4-java) hold the closures, which name the topic.
    assert_no_password_at_rest(
        [dirs["checkpoint"]], PASSWORDS, topic, first, second, found_in="(lz4-java decoded)"
    )


def test_structured_exact_over_tls_no_password_in_the_checkpoint(
    dirs: dict[str, Path], start_app: Any, tls: TlsBroker, tmp_path: Path
) -> None:
    rng = random.Random(43)
    topic, group = fresh_topic("tls-ss"), fresh_topic("tls-ss-group")
    sent = text_lines(rng, 240)
    produce(tls.connection(), topic, iter(sent), None, 0, 3)
    config = tls.ini(tmp_path / "kafka-tls.ini")
    app = start_app(
        "--config", str(config), "--engine", "structured",
        *kafka_args(dirs, tls.bootstrap, topic, "--group-id", group),
        env=ENV,
    )  # fmt: skip
    app.wait_for_log(QUERY_STARTED)
    wait_for_totals(dirs["output"], truth(sent), app, timeout=120)
    first_ends = end_offsets(tls.connection(), topic)
    more = text_lines(rng, 60)
    produce(tls.connection(), topic, iter(more), None, 0, 3)
    wait_for_totals(dirs["output"], truth(sent + more), app)
    # Spark hands a micro-batch's end to the source's commit when it plans the next one:
    # the micro-batches of the first records are committed to the group by now.
    _wait_group_reached(tls, group, topic, first_ends)
    assert app.terminate() == 0
    assert_no_password_at_rest([dirs["checkpoint"]], PASSWORDS, topic, app, found_in="/offsets/")


def _tls_ini(path: Path, files: TlsFiles, **changes: str) -> Path:
    settings = {
        "security_protocol": "ssl",
        "ssl_cafile": str(files.cafile),
        "ssl_certfile": str(files.certfile),
        "ssl_keyfile": str(files.keyfile),
        **changes,
    }
    path.write_text("[kafka]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
    return path


BAD_INPUT = {
    "wrong-password": (
        {},
        {"STREAMING_APP_SSL_PASSWORD": "not-the-password"},
        r"Error: ssl_password: does not decrypt the private key in ssl_keyfile \S+client\.key "
        r"\(wrong password\)",
    ),
    "no-password": (
        {},
        {},
        r"Error: ssl_keyfile \S+client\.key: the private key is encrypted and ssl_password is "
        r"not set \(set it in STREAMING_APP_SSL_PASSWORD or the config file\)",
    ),
    "key-of-another-certificate": (
        {"ssl_certfile": "SERVER_CERT"},
        ENV,
        r"Error: ssl_keyfile \S+client\.key: the private key does not match the certificate "
        r"in ssl_certfile \S+server\.pem",
    ),
    "missing-cafile": (
        {"ssl_cafile": "/nonexistent/ca.pem"},
        ENV,
        r"Error: ssl_cafile /nonexistent/ca\.pem: not readable \(No such file or directory\)",
    ),
    "missing-certfile": (
        {"ssl_certfile": "/nonexistent/client.pem"},
        ENV,
        r"Error: ssl_certfile /nonexistent/client\.pem: not readable "
        r"\(No such file or directory\)",
    ),
    "missing-keyfile": (
        {"ssl_keyfile": "/nonexistent/client.key"},
        ENV,
        r"Error: ssl_keyfile /nonexistent/client\.key: not readable "
        r"\(No such file or directory\)",
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("engine", ["dstream", "structured"])
@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_tls_input_is_one_line_exit_2_and_writes_nothing(
    case: str, engine: str, dirs: dict[str, Path], start_app: Any, tls_files: TlsFiles,
    tmp_path: Path,
) -> None:  # fmt: skip
    import re

    changes, env, expected = BAD_INPUT[case]
    if changes.get("ssl_certfile") == "SERVER_CERT":
        changes = {"ssl_certfile": str(tls_files.server_cert)}
    config = _tls_ini(tmp_path / "kafka-tls.ini", tls_files, **changes)
    app = start_app(
        "--config", str(config), "--engine", engine,
        *kafka_args(dirs, "127.0.0.1:9", fresh_topic("never")),
        env=env,
    )  # fmt: skip
    assert app.wait(timeout=50) == 2, app.log()
    lines = app.log().strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(expected, lines[0]), app.log()
    assert not dirs["checkpoint"].exists() and not dirs["output"].exists()


@pytest.mark.timeout(60)
def test_produce_with_a_wrong_key_password_is_one_line_exit_2(
    start_app: Any, tls_files: TlsFiles, tmp_path: Path
) -> None:
    config = _tls_ini(tmp_path / "kafka-tls.ini", tls_files)
    app = start_app(
        "--config", str(config), "--bootstrap-servers", "127.0.0.1:9", "--topic", "never",
        "--count", "1",
        env={"STREAMING_APP_SSL_PASSWORD": "not-the-password"}, command="produce",
    )  # fmt: skip
    assert app.wait(timeout=50) == 2, app.log()
    lines = app.log().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ssl_password: does not decrypt"), lines


BAD_BROKER_CERTIFICATE = {
    "untrusted": (
        "other_cafile",
        r"Error: ssl_cafile \S+other-ca\.pem: does not verify the certificate of the Kafka "
        r"broker at 127\.0\.0\.1:\d+ \((self-signed certificate in certificate chain|"
        r"unable to get local issuer certificate)\)",
    ),
    "misnamed": (
        None,
        r"Error: ssl_check_hostname: the certificate of the Kafka broker at 127\.0\.0\.1:\d+ "
        r"does not name 127\.0\.0\.1 \(IP address mismatch, certificate is not valid for "
        r"'127\.0\.0\.1'\); connect by a name it holds \(bootstrap_servers, the brokers' "
        r"advertised listeners\), or set ssl_check_hostname = false",
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("engine", ["dstream", "structured"])
@pytest.mark.parametrize("case", sorted(BAD_BROKER_CERTIFICATE))
def test_a_broker_certificate_the_settings_reject_is_one_line_exit_2_and_writes_nothing(
    case: str, engine: str, dirs: dict[str, Path], start_app: Any, tls: TlsBroker,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Not kafka-python's silent retries until kafka_give_up_after, then exit 1 and a
    supervisor's restarts for ever: a setting must change."""
    import re

    cafile, expected = BAD_BROKER_CERTIFICATE[case]
    changes = {"ssl_cafile": str(tls.files.other_cafile)} if cafile else {}
    bootstrap = tls.bootstrap if cafile else tls.misnamed_bootstrap
    config = _tls_ini(tmp_path / "kafka-tls.ini", tls.files, **changes)
    app = start_app(
        "--config", str(config), "--engine", engine,
        *kafka_args(dirs, bootstrap, fresh_topic("never")),
        env=ENV,
    )  # fmt: skip
    assert app.wait(timeout=50) == 2, app.log()
    lines = app.log().strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(expected, lines[0]), app.log()
    assert not dirs["checkpoint"].exists() and not dirs["output"].exists()


@pytest.mark.timeout(150)
@pytest.mark.parametrize("engine", ["dstream", "structured"])
def test_a_broker_that_comes_up_with_a_misnamed_certificate_ends_the_run_in_one_line_exit_2(
    engine: str, dirs: dict[str, Path], start_app: Any, tls: TlsBroker, tmp_path: Path
) -> None:
    """The driver checks the certificate whenever it connects again, not only at start."""
    port = free_port()
    config = _tls_ini(tmp_path / "kafka-tls.ini", tls.files)
    app = start_app(
        "--config", str(config), "--engine", engine,
        *kafka_args(dirs, f"127.0.0.1:{port}", fresh_topic("late")),
        env=ENV,
    )  # fmt: skip
    app.wait_for_log(rf"from the Kafka broker at 127\.0\.0\.1:{port} failed \(attempt 1\)")
    with misnamed_tunnel(tls, tmp_path, port):
        assert app.wait(timeout=90) == 2, app.log()[-3000:]
    last = app.log().strip().splitlines()[-1]
    assert last.startswith(
        f"Error: ssl_check_hostname: the certificate of the Kafka broker at 127.0.0.1:{port} "
        "does not name 127.0.0.1"
    ), app.log()[-3000:]
    output_without_traces(app)
