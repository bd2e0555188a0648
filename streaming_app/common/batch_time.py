"""Batch times: PySpark hands them over as naive local datetimes; we name things in epoch ms."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


log = logging.getLogger(__name__)


def epoch_ms(batch_time: datetime) -> int:
    """Epoch milliseconds (UTC) of a batch time, which PySpark hands over as naive local time."""
    return round(batch_time.timestamp() * 1000)
