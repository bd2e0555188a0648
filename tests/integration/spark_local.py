"""A local SparkSession for the tests that call Spark in-process (no `streaming-app run`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def local_session(
    app_name: str, conf: dict[str, str] | None = None, cores: int = 2
) -> Iterator[Any]:
    """`local[cores]` on loopback, no UI, Spark's log at ERROR, `conf` added; the Python
    workers run this interpreter (Arrow, psycopg and the app's code are in its venv).
    Stopped on leaving."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config(map=conf or {})
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
