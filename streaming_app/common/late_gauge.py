"""A Prometheus gauge that is not served before its first value (the endpoint's timestamps)."""

from __future__ import annotations

import threading
from typing import Any


class LateGauge:
    """A gauge served from its first value on: before it, no sample at all, rather than
    prometheus_client's 0, which an alert reads as a batch completed in 1970."""

    def __init__(self, registry: Any, name: str, documentation: str) -> None:
        from prometheus_client import Gauge

        self._registry = registry
        self.gauge = Gauge(name, documentation, registry=None)
        self._served = False
        self._lock = threading.Lock()

    def set(self, value: float) -> None:
        with self._lock:
            if not self._served:
                self._registry.register(self.gauge)
                self._served = True
        self.gauge.set(value)
