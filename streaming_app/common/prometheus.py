"""The driver's Prometheus endpoint: the app's own figures at `/metrics`, one registry a process.

Engine-neutral, on the driver. Both engines' metrics recorder (common/metrics_recorder.py)
hands it each completed batch, the same record it appends to `metrics_file`, and the
Kafka source's positions per partition (kept and served by common/kafka_lag.py). Names
follow Prometheus' conventions: the `streaming_app_` prefix, base units in the name
(`_seconds`), counters ending in `_total`, labels of bounded cardinality (topic and
partition, never a word). docs/metrics.md lists each series with its type, labels and
meaning.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

from streaming_app.common.health import Health
from streaming_app.common.kafka_lag import KafkaLag
from streaming_app.common.kafka_lag import PartitionPosition as PartitionPosition
from streaming_app.common.late_gauge import LateGauge as LateGauge
from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.common.scrapers import (
    DEFAULT_LINGER_SECONDS,
    Scrapers,
    is_server,
    scraper_of,
)
from streaming_app.errors import ConfigError, StopRequestedError

log = logging.getLogger(__name__)

PREFIX = "streaming_app"
# Seconds: a batch of a few tens of milliseconds up to one far behind.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# Why input values were skipped or repaired (`streaming_app_bad_values_total{reason}`):
# the Kafka source's read counts, and the keyed-sum job's bad CSV rows.
KAFKA_REASONS = ("empty", "oversize", "replaced", "lost")
CSV_REASONS = ("csv_columns", "csv_value", "csv_key", "csv_range")
# The servers whose calls are retried (`streaming_app_retries_total{peer}`).
PEERS = ("kafka", "postgres")
# What can fail (`streaming_app_failures_total{operation}`), served at 0 from the start:
# these always, and the Kafka source's `commit` and each configured sink's write.
ALWAYS_FAILABLE = ("snapshot", "checkpoint", "batch")


class Endpoint:
    """The series of one driver process, in a registry of its own, served over HTTP."""

    def __init__(self, info: dict[str, str], clock: Callable[[], float] = time.monotonic) -> None:
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
            Info,
            PlatformCollector,
            ProcessCollector,
        )

        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        Info(f"{PREFIX}", "The app: version, engine, job, source, sinks", registry=registry).info(
            info
        )
        self.batches = Counter(
            f"{PREFIX}_batches", "Batches completed by this driver process", registry=registry
        )
        self.records = Counter(
            f"{PREFIX}_records",
            "Input records (lines or Kafka messages) of the completed batches",
            registry=registry,
        )
        self.last_batch = LateGauge(
            registry,
            f"{PREFIX}_last_batch_timestamp_seconds",
            "Batch time of the newest completed batch (epoch seconds; absent before the first)",
        )
        self.last_completed = LateGauge(
            registry,
            f"{PREFIX}_last_batch_completed_timestamp_seconds",
            "When the newest batch completed (epoch seconds, the driver's clock; absent before "
            "the first)",
        )
        self.last_progress = LateGauge(
            registry,
            f"{PREFIX}_last_progress_timestamp_seconds",
            "When the stream last moved on: a batch completed, or (the structured engine) a "
            "trigger found no new input (epoch seconds; absent before the first)",
        )
        self.last_task = LateGauge(
            registry,
            f"{PREFIX}_last_task_completed_timestamp_seconds",
            "When a task of a running stage last completed, or a stage began or ended, as "
            "the driver's loop saw it (read every 5 s; epoch seconds; absent before the first)",
        )
        self.ready = Gauge(
            f"{PREFIX}_ready",
            "1 once the first batch after the start (after a recovery's replayed batches) has "
            "completed, or the structured engine found no new input; 0 before",
            registry=registry,
        )
        self.stopping = Gauge(
            f"{PREFIX}_stopping",
            "1 once a stop the app was asked for began (a signal, --duration): the driver's "
            "disappearance that follows is intended, not a crash",
            registry=registry,
        )
        self.interval = LateGauge(
            registry, f"{PREFIX}_batch_interval_seconds", "The batch interval"
        )
        self.snapshot_interval = LateGauge(
            registry,
            f"{PREFIX}_snapshot_interval_seconds",
            "The state snapshot interval (absent while snapshots are off)",
        )
        self.checkpoint_interval = LateGauge(
            registry,
            f"{PREFIX}_checkpoint_interval_seconds",
            "How often the app checkpoints while batches complete (DStreams: the state's "
            "checkpoint interval; the structured engine: every micro-batch)",
        )
        self.processing = Histogram(
            f"{PREFIX}_batch_processing_seconds",
            "Time a batch took to process",
            buckets=BUCKETS,
            registry=registry,
        )
        self.scheduling = Histogram(
            f"{PREFIX}_batch_scheduling_delay_seconds",
            "Time a batch waited for the one before it",
            buckets=BUCKETS,
            registry=registry,
        )
        self.falling_behind = LateGauge(
            registry,
            f"{PREFIX}_falling_behind",
            "1 while the scheduling delay grows past the batch interval (the job cannot keep "
            "up with its input), else 0; absent before the first batch",
        )
        # The Kafka positions and lag, served by a collector of their own (kafka_lag.py).
        self.kafka = KafkaLag(registry)
        self.operation = Histogram(
            f"{PREFIX}_operation_duration_seconds",
            "Time an operation took: a state snapshot, a Kafka batch's commit, a sink's write",
            ["operation"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.last_success = Gauge(
            f"{PREFIX}_last_success_timestamp_seconds",
            "When an operation last succeeded (epoch seconds)",
            ["operation"],
            registry=registry,
        )
        self.words = Counter(
            f"{PREFIX}_words",
            "Words counted by the completed batches (the word-count job)",
            registry=registry,
        )
        self.state_keys = LateGauge(
            registry,
            f"{PREFIX}_state_keys",
            "Keys in the running totals' state after the newest batch",
        )
        self.bad_values = Counter(
            f"{PREFIX}_bad_values",
            "Input values skipped or repaired as bad, by reason",
            ["reason"],
            registry=registry,
        )
        self.retries = Counter(
            f"{PREFIX}_retries",
            "Failed calls to a server (Kafka, PostgreSQL) that the app retried",
            ["peer"],
            registry=registry,
        )
        self.retrying_since = Gauge(
            f"{PREFIX}_retrying_since_timestamp_seconds",
            "When the oldest run of failed calls to a server (Kafka, PostgreSQL) that the "
            "driver still retries began (epoch seconds); absent while none is retried",
            ["peer"],
            registry=registry,
        )
        self.failures = Counter(
            f"{PREFIX}_failures",
            "Operations that failed: a snapshot, a checkpoint, a batch, a Kafka commit, a "
            "sink's write (after the retries of its own calls)",
            ["operation"],
            registry=registry,
        )
        # Every label value the run can report, at 0: increase() sees the first one.
        reasons = (KAFKA_REASONS if info.get("source") == "kafka" else ()) + (
            CSV_REASONS if info.get("app_job") == "keyed-sum" else ()
        )
        for reason in reasons:
            self.bad_values.labels(reason)
        for peer in PEERS:
            self.retries.labels(peer)
        failable = ALWAYS_FAILABLE + (("commit",) if info.get("source") == "kafka" else ())
        for operation in failable + tuple(s for s in info.get("sinks", "").split(",") if s):
            self.failures.labels(operation)
        self._clock = clock  # monotonic seconds: the loop's beats, the scrapes, the stop
        self._server: Any = None
        self._metrics_app: Any = None
        self._lock = threading.Lock()
        self.health = Health(clock)  # /healthz and /readyz (common/health.py)
        self._replay_batch: int | None = None  # structured: micro-batches up to it replay
        self.scrapers = Scrapers(clock)  # who scrapes /metrics; the stop's linger

    def succeeded(self, operation: str, seconds: float) -> None:
        """An operation (`snapshot`, `commit`) succeeded after `seconds`."""
        self.operation.labels(operation).observe(seconds)
        self.last_success.labels(operation).set_to_current_time()

    def observe(
        self,
        batch: BatchMetrics,
        behind: bool,
        partitions: Iterable[PartitionPosition] = (),
        replayed: bool = False,
    ) -> None:
        """Count one completed batch (its record as metrics_file has it); `replayed`: one
        of the intervals a recovered run replays, after which the app is ready."""
        with self._lock:
            self.batches.inc()
            if batch.records is not None:
                self.records.inc(batch.records)
            self.last_batch.set(batch.batch_time_ms / 1000)
            self.last_completed.set(batch.completed_ms / 1000)
            self.last_progress.set(batch.completed_ms / 1000)
            self.health.moved(batch.batch_interval_ms / 1000)
            if self._replay_batch is not None and batch.batch_id is not None:
                replayed = batch.batch_id <= self._replay_batch
                if batch.batch_id == self._replay_batch:
                    self.health.replayed()
            if not replayed:
                self.ready.set(1)
                self.health.ready()
            self.interval.set(batch.batch_interval_ms / 1000)
            if batch.processing_ms is not None:
                self.processing.observe(batch.processing_ms / 1000)
            if batch.scheduling_delay_ms is not None:
                self.scheduling.observe(batch.scheduling_delay_ms / 1000)
            if batch.words is not None:
                self.words.inc(batch.words)
            if batch.state_keys is not None:
                self.state_keys.set(batch.state_keys)
            self.falling_behind.set(1 if behind else 0)
        self.kafka.observe(partitions)

    def idle(self) -> None:
        """A trigger found no new input (the structured engine): the stream is up to date,
        though no batch ran."""
        with self._lock:
            self.last_progress.set(time.time())
            self.falling_behind.set(0)
            self.ready.set(1)
            self.health.moved()
            self.health.ready()

    def replaying(self, what: str, batch_id: int | None = None) -> None:
        """A recovery replays `what` (`/readyz` says so); the structured engine's micro-batches
        up to `batch_id` are the replay, after which the app is not yet ready."""
        with self._lock:
            self._replay_batch = batch_id
            self.health.replaying(what)

    def tasks(self, seen: Hashable) -> None:
        """What the running stages' tasks have done, as the driver's loop read it: served
        as the time a task last completed when it changed (common/health.py)."""
        if self.health.tasks(seen):
            self.last_task.set(time.time())

    def retrying(self, peer: str, token: object | None = None) -> object:
        """A run of retried calls to `peer` began (no `token`) or ended (its token): the
        series says when the oldest run still going on began."""
        if token is None:
            token = self.health.retrying(peer)
        else:
            self.health.retried(token)
        with self._lock:
            oldest = self.health.retrying_since(peer)
            if oldest is not None:
                self.retrying_since.labels(peer).set(time.time() - (self._clock() - oldest))
            else:
                with suppress(KeyError):  # served no run yet
                    self.retrying_since.remove(peer)
        return token

    def wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        """The port's routes: `/healthz`, `/readyz` (200, or 503 with the reason), and
        prometheus_client's `/metrics` (and the rest)."""
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ok, text = self.health.health() if path == "/healthz" else self.health.readiness()
            status = "200 OK" if ok else "503 Service Unavailable"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [(text + "\n").encode()]
        saw_stop = self.scrapers.stopping  # before the body: then it serves stopping 1
        body = self._metrics_app(environ, start_response)
        if path == "/metrics":
            self.scrapers.scraped(scraper_of(environ), saw_stop, is_server(environ))
        return body

    def begin_stop(self) -> None:
        """A stop the app was asked for began: served as `streaming_app_stopping 1`."""
        if not self.scrapers.stopping:
            self.stopping.set(1)
            self.scrapers.begin_stop()

    def linger(self, most: float) -> bool:
        """Before the port closes after a stop that was asked for: wait until every scraper
        seen lately has read `streaming_app_stopping 1`, so that each Prometheus knows the
        driver's disappearance is intended (alerts.yml); at most `most` seconds after the
        stop began (common/scrapers.py). Whether all did."""
        if self._server is None:
            return True
        left = self.scrapers.linger_seconds(most)
        if left > 0:
            waiting = ", ".join(str(s) for s in self.scrapers.waiting_for(most))
            log.info("waiting up to %.0f s for a last scrape of the metrics by %s", left, waiting)
        return self.scrapers.linger(most)

    def serve(self, host: str, port: int) -> int:
        """Serve `/metrics`, `/healthz` and `/readyz` on host:port (0: a free port);
        returns the port. ConfigError (exit 2) naming metrics_port when it cannot be
        bound."""
        from prometheus_client import make_wsgi_app

        from streaming_app.common.http_server import serve

        self._metrics_app = make_wsgi_app(self.registry)
        try:
            self._server = serve(host, port, self.wsgi)
        except OSError as exc:
            raise ConfigError(
                f"metrics_port {port} on metrics_host {host}: cannot listen ({exc.strerror or exc})"
            ) from None
        bound = int(self._server.server_address[1])
        log.info(
            "Prometheus metrics at http://%s:%d/metrics (health: /healthz, /readyz)", host, bound
        )
        return bound

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


_ENDPOINT: Endpoint | None = None


def start_endpoint(host: str, port: int, info: dict[str, str]) -> Endpoint:
    """The process's endpoint, serving from now on (one per process: a second call returns
    the first)."""
    global _ENDPOINT
    if _ENDPOINT is None:
        endpoint = Endpoint(info)
        endpoint.serve(host, port)
        _ENDPOINT = endpoint
    return _ENDPOINT


def endpoint() -> Endpoint | None:
    """The process's endpoint, None unless metrics_port is set."""
    return _ENDPOINT


def count_bad_values(counts: Mapping[str, int]) -> None:
    """Count a batch's bad values by reason on the endpoint, if one serves."""
    served = _ENDPOINT
    if served is not None:
        for reason, count in counts.items():
            if count > 0:
                served.bad_values.labels(reason).inc(count)


def kafka_started(positions: Mapping[tuple[str, int], int]) -> None:
    """Where a Kafka run starts (each partition's first offset to read), on the endpoint if
    one serves: lag is served from then on, before the first batch completes."""
    served = _ENDPOINT
    if served is not None:
        served.kafka.started(positions)


def beat(tasks: Callable[[], Hashable] | None = None) -> None:
    """The driver's loop came round (lifecycle/stopping.py), for `/healthz`; `tasks` reads
    the running stages' tasks (common/health.py `running_tasks`), every few seconds."""
    served = _ENDPOINT
    if served is None:
        return
    served.health.beat()
    if tasks is not None and served.health.tasks_due():
        try:
            served.tasks(tasks())
        except Exception:  # the JVM is stopping: nothing to read
            log.debug("could not read the running stages' tasks", exc_info=True)


def retry_began(peer: str) -> object | None:
    """A run of retried calls to `peer` began; its token, if an endpoint serves."""
    served = _ENDPOINT
    return None if served is None else served.retrying(peer)


def retry_ended(peer: str, token: object | None) -> None:
    """The run of retried calls `token` (retry_began's) ended."""
    served = _ENDPOINT
    if served is not None and token is not None:
        served.retrying(peer, token)


def replaying(what: str, batch_id: int | None = None) -> None:
    """A recovery replays `what` first (Endpoint.replaying), on the endpoint if one serves."""
    served = _ENDPOINT
    if served is not None:
        served.replaying(what, batch_id)


def count_retry(peer: str) -> None:
    """Count a failed call to `peer` (kafka, postgres) that is retried, if an endpoint serves."""
    served = _ENDPOINT
    if served is not None:
        served.retries.labels(peer).inc()


def succeeded(operation: str, seconds: float | None) -> None:
    """`operation` succeeded after `seconds` (None: how long it took is not known), on
    the endpoint if one serves."""
    served = _ENDPOINT
    if served is None:
        return
    if seconds is None:
        served.last_success.labels(operation).set_to_current_time()
    else:
        served.succeeded(operation, seconds)


def failed(operation: str) -> None:
    """Count a failure of `operation` on the endpoint, if one serves."""
    served = _ENDPOINT
    if served is not None:
        served.failures.labels(operation).inc()


@contextmanager
def counting_failures(operation: str) -> Iterator[None]:
    """Count the block's exception, if it raises one, as a failure of `operation` (not a
    stop that interrupted it)."""
    try:
        yield
    except StopRequestedError:
        raise
    except Exception:
        failed(operation)
        raise


@contextmanager
def timed(operation: str) -> Iterator[None]:
    """Time the block as `operation` on the endpoint, if one serves, when it succeeds;
    count it as a failure when it raises."""
    started = time.monotonic()
    with counting_failures(operation):
        yield
    succeeded(operation, time.monotonic() - started)


def begin_stop() -> None:
    """A stop the app was asked for began, on the endpoint if one serves."""
    served = _ENDPOINT
    if served is not None:
        served.begin_stop()


def stop_endpoint(linger: float = DEFAULT_LINGER_SECONDS) -> None:
    """Stop serving (the run ends); after a stop that was asked for, once every scraper
    seen lately has read it (at most `linger` seconds after the stop began)."""
    global _ENDPOINT
    if _ENDPOINT is not None:
        _ENDPOINT.linger(linger)
        _ENDPOINT.close()
        _ENDPOINT = None
