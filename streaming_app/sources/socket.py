"""Socket source (DStream): lines from a TCP server, for demos; it cannot replay.

Spark's receiver runs on an executor and stores what it reads (with the write-ahead log
in the checkpoint directory); the driver only builds the stream.
"""

from __future__ import annotations

import logging

from pyspark import StorageLevel
from pyspark.streaming import DStream, StreamingContext

log = logging.getLogger(__name__)


def socket_lines(ssc: StreamingContext, host: str, port: int) -> DStream[str]:
    """Lines from a TCP server: not replayable, so a driver crash may lose buffered lines."""
    # The write-ahead log (enabled in create_context) already makes received blocks
    # durable; replicating them as well would only cost memory and network.
    log.info("source: socket %s:%d (not replayable: a crash loses what is in flight)", host, port)
    return ssc.socketTextStream(host, port, StorageLevel.MEMORY_AND_DISK)
