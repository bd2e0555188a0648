"""A spy on the driver's Python actions: the records and bytes each returned, in any form."""

from __future__ import annotations

import pickle
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

RDD_ACTIONS = ("collect", "take", "takeOrdered", "top", "first", "collectAsMap", "takeSample")
FRAME_ACTIONS = ("collect", "take", "head", "first", "tail", "toArrow", "toPandas")


@dataclass
class Spy:
    """What the driver's actions returned, counted where an action returned it: the innermost
    spied call (takeOrdered's partitions' tops, as its own collect returned them)."""

    records: int = 0
    bytes: int = 0  # the results pickled: lines, JSON, CSV, Rows or Arrow alike
    calls: Counter[str] = field(default_factory=Counter)
    # Per thread (the two queries' foreachBatch calls run at once): the spied calls under
    # way, each with whether it made a spied call of its own.
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, action: str, run: Any) -> Any:
        stack = self._local.__dict__.setdefault("stack", [])
        if stack:
            stack[-1] = True
        stack.append(False)
        try:
            result = run()
        finally:
            nested = stack.pop()
        if not nested:
            size = len(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
            with self._lock:
                self.calls[action] += 1
                self.records += len(result) if hasattr(result, "__len__") else 1
                self.bytes += size
        return result


def spy_on(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    """Every driver-side action of RDDs and DataFrames, recorded; iterating refused."""
    from pyspark import RDD

    # The class of the session's frames (Spark 4's classic DataFrame overrides the API's).
    DataFrame = type(spark.range(1))  # noqa: N806 (a class)
    found = Spy()

    def wrap(owner: type, name: str) -> None:
        original = getattr(owner, name)

        def spied(self: Any, *args: Any, **kwargs: Any) -> Any:
            return found.call(f"{owner.__name__}.{name}", lambda: original(self, *args, **kwargs))

        monkeypatch.setattr(owner, name, spied)

    for name in RDD_ACTIONS:
        wrap(RDD, name)
    for name in FRAME_ACTIONS:
        wrap(DataFrame, name)
    monkeypatch.setattr(RDD, "toLocalIterator", _refused)
    monkeypatch.setattr(DataFrame, "toLocalIterator", _refused)
    yield found


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a sink iterates over rows on the driver")
