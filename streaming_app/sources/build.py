"""Source DStreams of lines: a TCP socket (demos), a watched directory and Kafka (replayable)."""

from __future__ import annotations

import logging
import time

from pyspark import StorageLevel
from pyspark.streaming import DStream, StreamingContext

from streaming_app.common.hadoop_fs import HadoopFs
from streaming_app.settings.schema import AppConfig
from streaming_app.sources.files_log import FilesTracking, InputFilesLog, track_files, visible_names

log = logging.getLogger(__name__)


def socket_lines(ssc: StreamingContext, host: str, port: int) -> DStream[str]:
    """Lines from a TCP server: not replayable, so a driver crash may lose buffered lines."""
    # The write-ahead log (enabled in create_context) already makes received blocks
    # durable; replicating them as well would only cost memory and network.
    log.info("source: socket %s:%d (not replayable: a crash loses what is in flight)", host, port)
    return ssc.socketTextStream(host, port, StorageLevel.MEMORY_AND_DISK)


def directory_lines(
    ssc: StreamingContext, input_dir: str, checkpoint_dir: str, seeded: frozenset[str]
) -> DStream[str]:
    """Lines of the files that appear in a directory: replayable, exact across crashes.

    Which files each batch read goes to `input-files/` under the checkpoint (snapshots
    record it); files counted into a restored context's seed are not read again.
    """
    fs = HadoopFs(ssc.sparkContext, checkpoint_dir)
    files_log = InputFilesLog(fs, checkpoint_dir)
    fs.delete(files_log.directory)  # a new context: entries of an earlier one do not apply
    existing = visible_names(HadoopFs(ssc.sparkContext, input_dir).list_names(input_dir))
    if existing and not seeded:
        log.warning(
            "source: %d file(s) already in %s are not read: only files moved in "
            "after the stream starts are counted",
            len(existing),
            input_dir,
        )
    # Files present now are either ignored by the stream or counted in the seed: either
    # way a later snapshot must not take them for new ones.
    files_log.write_files(int(time.time() * 1000), existing, note="present-at-start")
    log.info("source: files in %s (exactly-once across driver crashes)", input_dir)
    tracking = FilesTracking(checkpoint_dir, seeded)
    return ssc.textFileStream(input_dir).transform(lambda t, rdd: track_files(t, rdd, tracking))


def build_source(
    ssc: StreamingContext, config: AppConfig, seeded: frozenset[str] = frozenset()
) -> DStream[str]:
    """The configured source DStream (`seeded`: input files already in the initial state)."""
    if config.source == "socket":
        return socket_lines(ssc, config.host, config.port)
    if config.source == "files":
        assert config.input_dir is not None
        return directory_lines(ssc, config.input_dir, config.checkpoint_dir, seeded)
    if config.source == "kafka":
        from streaming_app.sources.kafka.stream import kafka_lines

        return kafka_lines(ssc, config)
    raise ValueError(f"unsupported source {config.source!r}")  # config validation prevents it
