"""The stopping signal as a scrape reads it: `streaming_app_stopping` 0, then 1 once asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming_app.common import prometheus
from tests.unit.common.test_prometheus import INFO, get


def stopping(port: int) -> list[float]:
    """The values of `streaming_app_stopping` in one scrape of /metrics."""
    status, body = get(port, "/metrics")
    assert status == 200, body
    return [
        sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == "streaming_app_stopping"
    ]


@pytest.fixture
def port() -> Iterator[int]:
    """A started endpoint's port; stopped after the test (a crash's stop: no wait)."""
    served = prometheus.start_endpoint("127.0.0.1", 0, INFO)
    yield int(served._server.server_address[1])
    prometheus.stop_endpoint()


def test_a_stop_asked_for_is_read_by_the_next_scrape_as_stopping_1(port: int) -> None:
    # Both values through the same probe: 0 while running (so that the probe can tell
    # them apart), 1 from the stop on, which StreamingAppDown's silence depends on.
    assert stopping(port) == [0.0]
    prometheus.begin_stop()
    assert stopping(port) == [1.0]
