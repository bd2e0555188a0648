"""Kafka lag per partition at the endpoint and in a real Prometheus server scraping it: the
broker's latest minus what was processed, after records arrived while the app was
stopped; bad values counted by reason; both engines."""

from __future__ import annotations

import random
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import kafka_args
from tests.integration.harness import free_port, make_text, wait_for
from tests.integration.kafka_helpers import end_offsets, fresh_topic, send, send_raw
from tests.integration.prometheus_server import Prometheus

pytestmark = pytest.mark.timeout(420)

_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ENGINE_ARGS = {"dstream": [], "structured": ["--engine", "structured"]}
Positions = dict[int, tuple[float, float | None, float | None]]


def samples(port: int) -> list[Any]:
    """Every sample the endpoint serves now ([] if it does not answer)."""
    try:
        with _LOOPBACK.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return []
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def bad_values(port: int) -> dict[str, float]:
    """streaming_app_bad_values_total by reason, as served now."""
    return {
        s.labels["reason"]: s.value
        for s in samples(port)
        if s.name == "streaming_app_bad_values_total"
    }


def as_positions(found: dict[int, dict[str, float]]) -> Positions:
    """partition -> (processed, latest, lag) of the samples by partition and name."""
    return {
        p: (
            v["streaming_app_kafka_processed_offset"],
            v.get("streaming_app_kafka_latest_offset"),
            v.get("streaming_app_kafka_lag_records"),
        )
        for p, v in found.items()
        if "streaming_app_kafka_processed_offset" in v
    }


def positions(port: int, topic: str) -> Positions:
    """partition -> (processed, latest, lag) as the endpoint serves them now."""
    found: dict[int, dict[str, float]] = {}
    for s in samples(port):
        if s.labels.get("topic") == topic:
            found.setdefault(int(s.labels["partition"]), {})[s.name] = s.value
    return as_positions(found)


def scraped_positions(prometheus: Prometheus, topic: str) -> Positions:
    """partition -> (processed, latest, lag) as Prometheus has them now: one instant query,
    so the three come from one scrape."""
    names = "streaming_app_kafka_(processed_offset|latest_offset|lag_records)"
    data = prometheus.api("query", query=f'{{__name__=~"{names}", topic="{topic}"}}') or {}
    found: dict[int, dict[str, float]] = {}
    for series in data.get("result") or []:
        labels = series["metric"]
        found.setdefault(int(labels["partition"]), {})[labels["__name__"]] = float(
            series["value"][1]
        )
    return as_positions(found)


@pytest.mark.parametrize("engine", sorted(ENGINE_ARGS))
def test_lag_per_partition_is_the_brokers_latest_minus_what_was_processed(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str, engine: str, tmp_path: Path
) -> None:
    rng = random.Random(41)
    topic = fresh_topic("lag")
    send(kafka_bootstrap, topic, make_text(rng, 120).splitlines())
    port = free_port()
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}", rules=None)
    try:
        prometheus.wait_ready()
        lag_scraped(dirs, start_app, kafka_bootstrap, engine, topic, port, prometheus, rng)
    finally:
        prometheus.stop()


def lag_scraped(
    dirs: dict[str, Path],
    start_app: Any,
    kafka_bootstrap: str,
    engine: str,
    topic: str,
    port: int,
    prometheus: Prometheus,
    rng: random.Random,
) -> None:
    """The test's body, with its Prometheus server."""
    # 25 records per partition a second: a backlog takes several batches to read.
    args = [
        *kafka_args(dirs, kafka_bootstrap, topic, *ENGINE_ARGS[engine]),
        "--max-rate-per-partition", "25", "--metrics-port", str(port),
        "--max-value-bytes", "1000",
    ]  # fmt: skip
    app = start_app(*args)

    def caught_up() -> Positions | None:
        ends = end_offsets(kafka_bootstrap, topic)
        now = positions(port, topic)
        done = len(now) == len(ends) and all(now[p] == (end, end, 0) for p, end in ends.items())
        return now if done else None

    wait_for("the first records all processed", caught_up, 150, app, pause=0.3)
    assert app.terminate() == 0, app.log()[-3000:]

    # Records arrive while the app is stopped; the restart reads them 50 a batch.
    send(kafka_bootstrap, topic, make_text(rng, 600).splitlines())
    ends = end_offsets(kafka_bootstrap, topic)
    app = start_app(*args)

    def behind() -> Positions | None:
        now = positions(port, topic)
        lagging = {p: v for p, v in now.items() if v[2]}
        return now if len(lagging) == len(ends) else None

    seen = wait_for("a lag on every partition after the restart", behind, 150, app, pause=0.3)
    for partition, (processed, latest, lag) in seen.items():
        assert latest == ends[partition], (partition, seen, ends)
        assert lag == latest - processed > 0, (partition, seen)

    def scraped_behind() -> Positions | None:
        now = scraped_positions(prometheus, topic)
        lagging = {p: v for p, v in now.items() if v[2] and v[1] == ends[p]}
        return now if len(lagging) == len(ends) else None

    # Prometheus has scraped a batch of the backlog: the same arithmetic, per partition.
    scraped = wait_for(
        "Prometheus to see a lag on every partition", scraped_behind, 60, app, pause=0.3
    )
    for partition, (processed, latest, lag) in scraped.items():
        assert lag == latest - processed > 0, (partition, scraped)
    wait_for("the backlog all processed", caught_up, 150, app, pause=0.3)
    done = {p: (end, end, 0) for p, end in ends.items()}
    wait_for(
        "Prometheus to see the backlog processed",
        lambda: scraped_positions(prometheus, topic) == done,
        60,
        app,
        pause=0.3,
    )
    assert bad_values(port) == {"empty": 0, "oversize": 0, "replaced": 0, "lost": 0}

    # Bad values: counted by reason, as the log's warning says them.
    send_raw(kafka_bootstrap, topic, [b"", None, b"x" * 2000, b"caf\xe9 au lait", b"ok"])
    expected = {"empty": 2, "oversize": 1, "replaced": 1, "lost": 0}
    wait_for(
        f"bad values counted as {expected}",
        lambda: bad_values(port) == expected,
        90,
        app,
        pause=0.3,
    )
    assert app.terminate() == 0, app.log()[-3000:]
