"""The configured source DStream of lines: a TCP socket (demos), a watched directory or Kafka."""

from __future__ import annotations

from pyspark.streaming import DStream, StreamingContext

from streaming_app.settings.schema import AppConfig
from streaming_app.sources.files import directory_lines
from streaming_app.sources.late_files import SnapshotFiles
from streaming_app.sources.socket import socket_lines


def build_source(
    ssc: StreamingContext,
    config: AppConfig,
    seeded: frozenset[str] = frozenset(),
    snapshot_files: SnapshotFiles | None = None,
) -> DStream[str]:
    """The configured source DStream (`seeded`: input files already in the initial state;
    `snapshot_files`: those the newest snapshot of this context includes, files source)."""
    if config.source == "socket":
        return socket_lines(ssc, config.host, config.port)
    if config.source == "files":
        assert config.input_dir is not None
        return directory_lines(
            ssc, config.input_dir, config.checkpoint_dir, seeded, config.batch_ms, snapshot_files
        )
    if config.source == "kafka":
        from streaming_app.sources.kafka.stream import kafka_lines

        return kafka_lines(ssc, config)
    raise ValueError(f"unsupported source {config.source!r}")  # config validation prevents it
