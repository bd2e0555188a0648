"""The Python worker daemon Spark forks its workers from: pyspark.daemon, preloaded.

Both engines have Spark start it on a local master (`spark.python.daemon.module`, see
`daemon_module`): `python -m streaming_app.lifecycle.worker_daemon pyspark.worker`.
Two costs of the stock daemon go away:

- Every worker imported PySpark's worker module and kafka-python again after its fork;
  here the daemon imports them once and each fork inherits them.
- A reused worker runs `gc.collect()` after every task, and each collection walked
  every object those imports created (about 30 ms a task). `gc.freeze()` moves them
  out of the collector's reach, so a collection walks only what the task left.

The daemon holds no cluster secret: an executor's environment carries Spark's
`_SPARK_AUTH_SECRET` (its worker puts it there), which every forked worker, and so any
task's code or dependency, would inherit. Started with it, the daemon runs itself again
without it (`os.execve`: the environment a process was started with stays readable in
`/proc/<pid>/environ` after an `unsetenv`, and so in every fork). The Python workers never
need it: PySpark authenticates them to their executor with a token of its own.

Nothing imported here starts a thread: the daemon must not have any when it forks.
Arrow and pandas do (numpy's BLAS pool, Arrow's jemalloc), so a structured engine's
worker imports them after its fork, in its first task, which then calls `freeze_once`.
"""

from __future__ import annotations

import gc
import os
import sys

from streaming_app.lifecycle.spark_secret import ENV_SECRET

DAEMON_MODULE = "spark.python.daemon.module"
PRELOADED = "streaming_app.lifecycle.worker_daemon"
STOCK = "pyspark.daemon"

_frozen = False


def daemon_module(master: str) -> str:
    """The daemon for a master: this one on `local*`; Spark's own on a cluster, whose
    executors may have the app only in the --py-files zip, which a worker adds to its
    path but a daemon could not import."""
    return PRELOADED if master.startswith("local") else STOCK


def without_secret(environ: dict[str, str]) -> dict[str, str] | None:
    """The environment to start the daemon in again, without Spark's secret; None if it
    holds none."""
    if ENV_SECRET not in environ:
        return None
    return {key: value for key, value in environ.items() if key != ENV_SECRET}


def preload() -> None:
    """Import what the workers run and freeze it for the collector."""
    import pyspark.worker  # noqa: F401 (every task's entry point)

    try:  # only the Kafka source needs it: a cluster may run without it
        import kafka.consumer
        import kafka.record.default_records  # noqa: F401
    except ImportError:
        pass
    gc.collect()
    gc.freeze()


def threads() -> int:
    """This process's threads, native ones too (1 where /proc cannot tell)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def freeze_once() -> None:
    """In a worker: freeze, once per process, what it imported since its fork.

    Called first thing by a task of the structured engine, whose workers import Arrow
    and pandas on their first task: the collection after each later task then walks
    only what that task left (about 25 ms less a task). Objects frozen are still freed
    when their last reference goes; only a cycle among them would stay.
    """
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


if __name__ == "__main__":
    from pyspark import daemon

    clean = without_secret(dict(os.environ))
    if clean is not None:  # the same process (its pipes to the executor), a new environment
        os.execve(sys.executable, [sys.executable, "-m", PRELOADED, *sys.argv[1:]], clean)
    preload()
    if threads() > 1:  # a PySpark whose worker module starts a thread: fork from the stock one
        print("worker daemon: a preloaded import started a thread; using pyspark.daemon",
              file=sys.stderr)  # fmt: skip
        os.execv(sys.executable, [sys.executable, "-m", STOCK, *sys.argv[1:]])
    daemon.manager()
