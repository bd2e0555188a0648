"""The Kafka source's DStream: a deterministic direct stream planned on the driver.

A cheap tick stream (an empty watched directory) drives the batches. For each batch time
the driver runs `planner.plan_batch`: it reuses the ranges the offset log holds for it (a
replay after recovery) or plans new ones and logs them atomically before the batch runs;
executors then read exactly those ranges (`reader.read_range`). The batch is marked done
by the commit protocol (sinks/commit.py), the last output operation.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streaming_app.common.fs import join
from streaming_app.sources.kafka.planner import discard_orphaned_logs, plan_batch
from streaming_app.sources.kafka.settings import KafkaSettings, source_line

if TYPE_CHECKING:
    from pyspark.streaming import DStream, StreamingContext

    from streaming_app.settings.schema import AppConfig

log = logging.getLogger(__name__)

TICK_DIR = "kafka-tick"


def kafka_lines(ssc: StreamingContext, config: AppConfig) -> DStream[str]:
    """Message values of the configured topics, one batch per planned set of ranges."""
    from streaming_app.common.hadoop_fs import HadoopFs

    settings = KafkaSettings.from_config(config)
    fs = HadoopFs(ssc.sparkContext, config.checkpoint_dir)
    discard_orphaned_logs(fs, config.checkpoint_dir)
    tick_dir = join(config.checkpoint_dir, TICK_DIR)
    fs.mkdirs(tick_dir)
    log.info("%s", source_line(settings))
    tick = ssc.textFileStream(tick_dir)
    # The lambda captures only the frozen settings, so it pickles into the checkpoint.
    return tick.transform(lambda t, rdd: plan_batch(t, rdd, settings))
