"""Batch times: PySpark hands them over as naive local datetimes; we name things in epoch ms."""

from __future__ import annotations

from datetime import datetime


def epoch_ms(batch_time: datetime) -> int:
    """Epoch milliseconds (UTC) of a batch time, which PySpark hands over as naive local time."""
    return round(batch_time.timestamp() * 1000)


def spark_seconds(milliseconds: int) -> float:
    """Seconds for PySpark's duration arguments, which it truncates: int(seconds * 1000).

    ms / 1000 can come back as ms - 1 (int(2.01 * 1000) == 2009); half a millisecond
    more always truncates to exactly `milliseconds`.
    """
    return (milliseconds + 0.5) / 1000
