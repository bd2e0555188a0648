"""Console sink: the top keys by value as one line per batch (or per slide of a window).

Runs on the driver, as an output operation. With state buckets the top N is ranked on the
driver from the buckets' own top keys, which the batch's digest brings (state/view.py: one
small job that every sink of the batch shares); with one record per key, and for a
window, `takeOrdered` is a Spark job over every total. The line is printed by the driver.
"""

from __future__ import annotations

import sys
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from streaming_app.common.batch_time import epoch_ms
from streaming_app.sinks.commit import mark_written
from streaming_app.sinks.files_layout import format_value
from streaming_app.state.buckets import rank
from streaming_app.state.observe import observe_state

if TYPE_CHECKING:
    from pyspark import RDD

    from streaming_app.state.view import StateView


def _shown(top: list[tuple[str, Any]]) -> str:
    if not any(isinstance(v, Decimal) for _, v in top):
        return str(top)
    return "[" + ", ".join(f"({k!r}, {format_value(v)})" for k, v in top) + "]"


def console_line(batch_time: datetime, top: list[tuple[str, Any]], label: str = "Counts") -> str:
    """The seed-familiar line: `Counts at time 2026-11-22 10:00:01 [('a', 3), ('b', 1)]`."""
    return f"{label} at time {batch_time:%Y-%m-%d %H:%M:%S} {_shown(top)}"


def print_line(batch_time: datetime, top: list[tuple[str, Any]], label: str = "Counts") -> None:
    """Print one console line to stdout."""
    sys.stdout.write(console_line(batch_time, top, label) + "\n")
    sys.stdout.flush()


def write_console(batch_time: datetime, state: RDD[Any], view: StateView, top_n: int) -> None:
    """Console sink: print the batch's top words by total to stdout.

    With state buckets the top is ranked from each bucket's own top keys (the digest).
    """
    print_line(batch_time, view.top(state, top_n))
    mark_written(epoch_ms(batch_time), "console")
    observe_state(batch_time, state, view)


def write_window_console(batch_time: datetime, rdd: RDD[tuple[str, Any]], top_n: int) -> None:
    """Console sink: the top keys of the window that ends at this batch."""
    print_line(batch_time, rdd.takeOrdered(top_n, key=rank), label="Window")
