"""The cost of security: the exact configuration with every protection on against none.

Every side runs the README's setup for exact totals (bench/throughput/exact.py: Kafka source,
`--sink files --sink console`, a state checkpoint and a snapshot every 10 batches,
`local[2]`, capped batches). Every protection on: a Spark secret file
(`--spark-secret-file`, mode 600: authentication, AES-based RPC encryption, encrypted local
disk, no UI kill) and Kafka over TLS with a client certificate and an encrypted key (its
password in the environment), through stunnel in front of tansu (the suite's broker,
tests/integration/kafka_tls.py). No protection: the same app on a plain tansu. Spark's
protections alone (the secret file, plain Kafka) split the cost. Each run reads a topic of
its own (the same corpus on every side) in steady batches, is killed with kill -9 once past
a state checkpoint, is restarted while a backlog of one batch waits, reads it, and its
files sink's totals are checked against the corpus and the backlog. Sides alternate round
after round (bench/harness/rates.py). Then bench/costs/security_paths.py's reads tell
stunnel's hop from the encryption.
"""

from __future__ import annotations

import os
import secrets
import ssl
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.costs.security_paths import HOP, STRAIGHT, TLS, Route, connects, plain_hop, reads
from bench.harness.processes import process_cpu_s
from bench.harness.rates import interleaved
from bench.harness.side_runs import (
    BACKLOG_SEED,
    CORPUS_SEED,
    EACH,
    Side,
    corpus_counts,
    ratio,
    runner,
)
from bench.throughput.exact import HEADLINE_LINES
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker
from streaming_app.tools.tls_broker import stunnel_binary, tls_broker

PLAIN, SECURED = "no protection", "every protection on"
SPARK_ONLY = "Spark's protections alone (plain Kafka)"
# The full run's batch size: the exact configuration's headline.
SECURITY_LINES = HEADLINE_LINES
# The target of issue 39: a secured run at most this many times the plain one.
TARGET = 1.2
# How many times each path's one-record read is timed (bench/costs/security_paths.py).
CONNECT_REPEATS = 20
# The client key's password: the benchmark's own, given to the app in its environment only.
KEY_PASSWORD = secrets.token_hex(12)


def unavailable() -> str | None:
    """Why the secured side cannot run here (one line), or None."""
    if stunnel_binary() is None:
        return "the security benchmark needs stunnel (Debian: stunnel4) and openssl"
    return None


def tls_versions() -> str:
    """stunnel's version and the OpenSSL the app's Python uses, for the report."""
    stunnel = stunnel_binary()
    found = subprocess.run([stunnel or "stunnel", "-version"], capture_output=True, text=True)
    line = next((x for x in found.stderr.splitlines() if x.startswith("stunnel ")), "stunnel")
    return f"{line.split(' on ')[0]}, the client's {ssl.OPENSSL_VERSION}"


def secret_file(path: Path) -> Path:
    """A Spark secret in a file only its owner may read, as docs/security.md says."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return path


@contextmanager
def sides(workdir: Path) -> Iterator[dict[str, Side]]:
    """Each side on a tansu of its own, started together and loaded alike (not
    KAFKA_BOOTSTRAP, nor the broker other benchmarks filled: the sides differ by the
    protections alone): no protection, Spark's protections alone, and every protection
    on, its tansu behind stunnel; by label."""
    with (
        open(workdir / "plain-tansu.log", "wb") as plain_log,
        open(workdir / "spark-only-tansu.log", "wb") as spark_only_log,
        DevBroker(log=plain_log) as plain_broker,
        DevBroker(log=spark_only_log) as spark_only_broker,
        tls_broker(workdir / "tls-broker", KEY_PASSWORD) as tls,
    ):
        secret = ("--spark-secret-file", str(secret_file(workdir / "spark-secret")))
        tls_ini = ("--config", str(tls.ini(workdir / "kafka-tls.ini")))
        yield {
            PLAIN: Side(PLAIN, "plain", KafkaConnection(plain_broker.bootstrap)),
            SPARK_ONLY: Side(SPARK_ONLY, "spark-only",
                             KafkaConnection(spark_only_broker.bootstrap), secret),
            SECURED: Side(SECURED, "secured", tls.connection(), (*tls_ini, *secret),
                          {"STREAMING_APP_SSL_PASSWORD": KEY_PASSWORD}),
        }  # fmt: skip


def security_cost(
    workdir: Path,
    batch_lines: int,
    rounds: int,
    every: int,
    parts: bool = True,
    read_lines: int = 200_000,
    read_repeats: int = 5,
) -> dict[str, Any]:
    """Every side `rounds` times, alternated; their medians and the ratios to the plain
    side. `parts`: Spark's protections alone as a third side. Then the Kafka read paths
    (bench/costs/security_paths.py) over `read_lines` lines."""
    reason = unavailable()
    if reason:
        raise SystemExit(f"error: {reason}")
    lines = batch_lines * (every + 3)
    expected = corpus_counts(lines, CORPUS_SEED) + corpus_counts(batch_lines, BACKLOG_SEED)
    stunnel = str(workdir / "tls-broker" / "stunnel.conf")  # tls_broker's, unique to it
    with sides(workdir) as by_label:
        chosen = [by_label[PLAIN], *([by_label[SPARK_ONLY]] if parts else []), by_label[SECURED]]
        runs: dict[str, Callable[[str], dict[str, Any]]] = {
            side.label: runner(workdir, side, batch_lines, every, expected,
                               stunnel if side.label == SECURED else None)
            for side in chosen
        }  # fmt: skip
        found = interleaved(rounds, runs, each=EACH, rotate=True)
        with plain_hop(workdir) as hop:
            routes: dict[str, Route] = {
                STRAIGHT: (by_label[PLAIN].connection, None),
                **({HOP: hop} if hop else {}),
                TLS: (by_label[SECURED].connection, process_cpu_s(stunnel)),
            }
            paths = reads(routes, read_lines, read_repeats)
            connect_ms = connects(routes, CONNECT_REPEATS)
    off = found[PLAIN]
    for figures in found.values():
        figures["ratio_processing"] = ratio(figures["processing_s"], off["processing_s"])
        figures["ratio_words"] = ratio(off["mean_words_per_s"], figures["mean_words_per_s"])
        for key in ("restart_first_batch_s", "restart_caught_up_s", "app_cpu_s"):
            figures[f"ratio_{key}"] = ratio(figures[key], off[key])
    return {
        "batch_lines": batch_lines,
        "state_keys": len(expected),
        "tls": tls_versions(),
        "checkpoint_batches": every,
        "rounds": rounds,
        "sides": [{"side": label, **figures} for label, figures in found.items()],
        "paths_us": paths,
        "paths_lines": read_lines,
        "paths_repeats": read_repeats,
        "connect_ms": connect_ms,
        "connect_repeats": CONNECT_REPEATS,
    }
