"""Source DStreams of lines: a TCP socket (demos) and a watched directory (replayable)."""

from __future__ import annotations

import logging
import os

from pyspark import StorageLevel
from pyspark.streaming import DStream, StreamingContext

from streaming_app.config import AppConfig, is_local_path

log = logging.getLogger(__name__)


def socket_lines(ssc: StreamingContext, host: str, port: int, local: bool) -> DStream[str]:
    """Lines from a TCP server: not replayable, so a driver crash may lose buffered lines."""
    # Replicating received blocks needs a second executor; in local mode there is none.
    level = StorageLevel.MEMORY_AND_DISK if local else StorageLevel.MEMORY_AND_DISK_2
    log.info("source: socket %s:%d (at-most-once across driver crashes)", host, port)
    return ssc.socketTextStream(host, port, level)


def directory_lines(ssc: StreamingContext, input_dir: str) -> DStream[str]:
    """Lines of the files that appear in a directory: replayable, exact across crashes."""
    if is_local_path(input_dir):
        existing = [n for n in os.listdir(input_dir) if not n.startswith((".", "_"))]
        if existing:
            log.warning(
                "source: %d file(s) already in %s are not read: only files moved in "
                "after the stream starts are counted",
                len(existing),
                input_dir,
            )
    log.info("source: files in %s (exactly-once across driver crashes)", input_dir)
    return ssc.textFileStream(input_dir)


def build_source(ssc: StreamingContext, config: AppConfig) -> DStream[str]:
    """The configured source DStream."""
    if config.source == "socket":
        local = (ssc.sparkContext.master or "").startswith("local")
        return socket_lines(ssc, config.host, config.port, local)
    if config.source == "files":
        assert config.input_dir is not None
        return directory_lines(ssc, config.input_dir)
    raise ValueError(f"unsupported source {config.source!r}")  # config validation prevents it
