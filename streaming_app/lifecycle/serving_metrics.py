"""Serving a run's metrics: the Prometheus endpoint started before Spark, with the run's settings.

Driver side, both engines, when metrics_port is set. The endpoint itself, its series and
its HTTP server, is common/prometheus.py; this module knows the run's
settings (where to listen, the info series' labels, the snapshot and checkpoint intervals)
and, for a Kafka run, starts the lag watch that reads the broker on the endpoint's own
schedule (sources/kafka/lag_watch.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from streaming_app import __version__
from streaming_app.common.prometheus import start_endpoint, stop_endpoint
from streaming_app.settings.schema import AppConfig


def run_info(config: AppConfig) -> dict[str, str]:
    """The labels of `streaming_app_info`: what runs, never a path or a credential."""
    return {
        "version": __version__,
        "engine": config.engine,
        # Not `job`: Prometheus keeps that label for its scrape job (the app's would be
        # stored as `exported_job`).
        "app_job": config.job,
        "source": config.source,
        "sinks": ",".join(config.sinks),
    }


@contextmanager
def serving_metrics(config: AppConfig) -> Iterator[None]:
    """Serve `/metrics` for the run's duration, if metrics_port is set (ConfigError, exit 2,
    if the port cannot be bound)."""
    if config.metrics_port is None:
        yield
        return
    served = start_endpoint(config.metrics_host, config.metrics_port, run_info(config))
    if config.snapshot_keep > 0:  # for the alert on a snapshot too old or never written
        served.snapshot_interval.set(config.snapshot_ms / 1000)
    # For the alert on a checkpoint too old or never written: each micro-batch commits.
    every = config.batch_ms if config.engine == "structured" else config.checkpoint_ms
    served.checkpoint_interval.set(every / 1000)
    watch = None
    if config.source == "kafka":  # the lag read from the broker on the endpoint's schedule
        from streaming_app.sources.kafka.client import KafkaConnection
        from streaming_app.sources.kafka.lag_watch import LagWatch

        watch = LagWatch(KafkaConnection.from_config(config), config.topics, served.kafka)
        served.kafka.on_lag(watch.wake)
        watch.start()
    try:
        yield
    finally:
        if watch is not None:
            watch.stop()
        stop_endpoint(config.metrics_linger_seconds)
