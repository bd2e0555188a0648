"""The Python worker daemon Spark forks its workers from: pyspark.daemon, preloaded.

Spark starts it with `python -m streaming_app.dstream.worker_daemon pyspark.worker` when
`spark.python.daemon.module` names it (create_context sets that for new contexts).
Two costs of the stock daemon go away:

- Every worker imported kafka-python and the app's modules again after its fork; here
  the daemon imports them once and each fork inherits them.
- A reused worker runs `gc.collect()` after every task, and each collection walked
  every object those imports created (about 30 ms a task). `gc.freeze()` moves them
  out of the collector's reach, so a collection walks only what the task left.

Nothing imported here starts a thread: the daemon must not have any when it forks.
"""

from __future__ import annotations

import gc

from pyspark import daemon


def preload() -> None:
    """Import what the workers run (done above, at import) and freeze it for the collector."""
    try:  # only the Kafka source needs it: a cluster may run without it
        import kafka.consumer
        import kafka.record.default_records  # noqa: F401
    except ImportError:
        pass
    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    preload()
    daemon.manager()
