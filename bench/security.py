"""The cost of security: the exact configuration with every protection on against none.

Every side runs the README's setup for exact totals (bench/exact.py: Kafka source,
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
after round (bench/rates.py). Then bench/security_paths.py's reads tell stunnel's hop from
the encryption.
"""

from __future__ import annotations

import os
import secrets
import ssl
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from bench.exact import HEADLINE_LINES, steady_cycle
from bench.harness import (
    BATCH_S,
    PARTITIONS,
    VOCABULARY,
    WORDS_PER_LINE,
    AppRun,
    exact_args,
    kafka_args,
    load_topic,
)
from bench.rates import batch_figures, idle_batches, interleaved, steady_batches
from bench.recovery import restart, wait_for_counted
from bench.security_paths import (
    HOP,
    STRAIGHT,
    TLS,
    Route,
    connects,
    plain_hop,
    process_cpu_s,
    reads,
    session_cpu_s,
)
from streaming_app.sinks.files_layout import read_totals
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.dev_broker import DevBroker
from streaming_app.tools.produce import generated_lines, produce
from tests.integration.kafka_tls import stunnel_binary, tls_broker

PLAIN, SECURED = "no protection", "every protection on"
SPARK_ONLY = "Spark's protections alone (plain Kafka)"
# The full run's batch size: the exact configuration's headline.
SECURITY_LINES = HEADLINE_LINES
# The target of issue 39: a secured run at most this many times the plain one.
TARGET = 1.2
CORPUS_SEED, BACKLOG_SEED = 1, 39
# How many times each path's one-record read is timed (bench/security_paths.py).
CONNECT_REPEATS = 20
# The client key's password: the benchmark's own, given to the app in its environment only.
KEY_PASSWORD = secrets.token_hex(12)


@dataclass(frozen=True)
class Side:
    """One side of the comparison: how its app reaches its broker, and what it adds."""

    label: str
    slug: str
    connection: KafkaConnection
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


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


def corpus_counts(lines: int, seed: int) -> Counter[str]:
    """The words of the first `lines` lines load_topic (or the backlog) sends."""
    counts: Counter[str] = Counter()
    for line in islice(generated_lines(WORDS_PER_LINE, VOCABULARY, seed), lines):
        counts.update(line.split())
    return counts


def run_once(
    workdir: Path,
    name: str,
    side: Side,
    batch_lines: int,
    every: int,
    expected: Counter[str],
    cpu_of: str | None = None,
) -> dict[str, Any]:
    """One run of a side: steady batches, a kill -9 past a checkpoint, a restart with one
    batch of backlog; the steady batches' figures, the restart's, whether the totals are
    exact (the corpus and the backlog, each word counted once), and with `cpu_of` the CPU
    seconds of the process whose command line holds it while the app read the corpus."""
    lines = batch_lines * (every + 3)  # 2 warm-up batches, `every` steady, a last one
    topic = load_topic(side.connection, lines, seed=CORPUS_SEED)
    rate = max(1, batch_lines // (PARTITIONS * BATCH_S))
    run_dir = workdir / name
    args = [
        *kafka_args(run_dir, side.connection.bootstrap_servers, topic,
                    "--max-rate-per-partition", str(rate)),
        *exact_args(run_dir, every), *side.args,
    ]  # fmt: skip
    cpu = process_cpu_s(cpu_of) if cpu_of else None
    cpu_before = cpu() if cpu else 0.0
    app = AppRun.start(workdir, name, args, env=side.env)
    try:
        # The app's CPU over its batches after the first two (JVM warm-up), to the end
        # of the corpus: on a loaded machine a steadier measure than the batches' time.
        app.wait_for(lambda b: sum(1 for x in b if x.records) >= 2, 120 + lines / 50)
        warm_cpu_s = session_cpu_s(app.proc.pid)
        wait_for_counted(app, lines, 120 + lines / 50)
        app_cpu_s = round(session_cpu_s(app.proc.pid) - warm_cpu_s, 2)
        cpu_s = round(cpu() - cpu_before, 2) if cpu else None
        batches = app.batches()
        # Past a state checkpoint written after the corpus was read, as a long-running
        # driver is: `every` batches that read nothing have completed (on a loaded machine
        # a wait of `every` intervals could kill it with those still queued).
        app.wait_for(lambda b: len(idle_batches(b, lines)) >= every, 120 + 6 * every * BATCH_S)
        app.kill9()
        backlog = generated_lines(WORDS_PER_LINE, VOCABULARY, BACKLOG_SEED)
        produce(side.connection, topic, backlog, batch_lines, 0, PARTITIONS)
        app, first_s = restart(workdir, name, args, side.env)
        wait_for_counted(app, lines + batch_lines, 300)
        caught_up_s = time.time() - app.started
        _, totals = read_totals(str(run_dir / "output"))
        app.kill9()  # every figure is taken: a graceful stop would only cost time
    finally:
        app.stop()
    busy = [b for b in batches if b.records and b.processing_ms]
    steady = steady_batches(busy, [b.records or 0 for b in busy], 0)
    return {
        **batch_figures([(b.records or 0, (b.processing_ms or 0) / 1000) for b in steady]),
        **steady_cycle(every)(batches, steady),
        "restart_first_batch_s": round(first_s, 1),
        "restart_caught_up_s": round(caught_up_s, 1),
        "exact": totals == expected,
        "cpu_s": cpu_s,
        "app_cpu_s": app_cpu_s,
    }


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
    (bench/security_paths.py) over `read_lines` lines."""
    reason = unavailable()
    if reason:
        raise SystemExit(f"error: {reason}")
    lines = batch_lines * (every + 3)
    expected = corpus_counts(lines, CORPUS_SEED) + corpus_counts(batch_lines, BACKLOG_SEED)
    stunnel = str(workdir / "tls-broker" / "stunnel.conf")  # tls_broker's, unique to it
    with sides(workdir) as by_label:
        chosen = [by_label[PLAIN], *([by_label[SPARK_ONLY]] if parts else []), by_label[SECURED]]
        runs: dict[str, Callable[[str], dict[str, Any]]] = {
            side.label: _runner(workdir, side, batch_lines, every, expected,
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
        figures["ratio_processing"] = _ratio(figures["processing_s"], off["processing_s"])
        figures["ratio_words"] = _ratio(off["mean_words_per_s"], figures["mean_words_per_s"])
        for key in ("restart_first_batch_s", "restart_caught_up_s", "app_cpu_s"):
            figures[f"ratio_{key}"] = _ratio(figures[key], off[key])
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


# The figures of every run that the report shows, beside their medians.
EACH = ("processing_s", "mean_words_per_s", "restart_first_batch_s", "restart_caught_up_s",
        "exact", "cpu_s", "app_cpu_s")  # fmt: skip


def _runner(
    workdir: Path,
    side: Side,
    batch_lines: int,
    every: int,
    expected: Counter[str],
    cpu_of: str | None,
) -> Callable[[str], dict[str, Any]]:
    return lambda suffix: run_once(
        workdir, f"security-{side.slug}-{suffix}", side, batch_lines, every, expected, cpu_of
    )


def _ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 2) if denominator else float("nan")
