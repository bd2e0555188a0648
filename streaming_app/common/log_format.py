"""The app's log line format, in the driver and in the Python workers Spark starts."""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def ensure_worker_logging() -> None:
    """In a Python worker (executor side), where nothing set logging up: the app's warnings
    go to stderr in the driver's format, instead of logging's bare last-resort lines."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT, stream=sys.stderr)
