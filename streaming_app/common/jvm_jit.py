"""The JVMs' JIT: C1 only, not minutes of compiling at start.

In `local[*]` the driver JVM is also the executor: it schedules the tasks, moves the
Python workers' bytes, shuffles and caches them, and HotSpot compiles its hot methods
meanwhile. Measured on the project's 2-core machines (bench/NOTES-perf.md), the JIT's
compiler threads were the largest CPU consumer of a Kafka run in its first half
minute: 10 ms of CPU per 1000 lines, more than the Python workers' counting, on cores
the workers need. `-XX:TieredStopAtLevel=1` keeps HotSpot's quick C1 compiler and skips
the optimizing C2: what the JVM does here is mostly moving bytes, which C1's code does
about as fast (the side-by-side runs in the notes, after a short and a longer warm-up).
On a cluster the driver JVM moves no rows at all (the executors read, count and write);
it plans the batches and schedules their tasks, and C2's compiling was most of its CPU in
a run's first minutes (docs/benchmarks-scale-out.md), on a host it may share.

For the JVM the app launches itself, whatever the master (spark_env.launching_jvm), and
for the driver JVM scripts/submit.sh launches (`python -m streaming_app.common.jvm_jit`
prints the JAVA_TOOL_OPTIONS it exports). `JAVA_TOOL_OPTIONS` carries it (the JVM says
"Picked up JAVA_TOOL_OPTIONS" on stderr), after any of the user's; a user's own
`TieredStopAtLevel`, `TieredCompilation` or `STREAMING_APP_JVM_C1=0` leaves the JIT as it
is, and so do options of the command line (spark-submit's `--driver-java-options`), which
the JVM reads after these.

The executors' JVMs on a cluster (any master but local, where the driver's JVM is the
executor): `spark.executor.extraJavaOptions` gets the same option after any of the
user's (executor_options). They do the work the local JVM does, and C2's compiling was
half of their JVM's CPU in a run's first minute, once in every executor
(docs/benchmarks-scale-out.md). `STREAMING_APP_JVM_C1=driver` keeps Java's JIT in the
executors only; a `spark.executor.extraJavaOptions` that names the JIT is left as it is.
"""

from __future__ import annotations

import os

ENV = "STREAMING_APP_JVM_C1"
# STREAMING_APP_JVM_C1's value that keeps C1 for the driver alone (0: for neither).
DRIVER_ONLY = "driver"
CHOICES = ("1", "0", DRIVER_ONLY)  # the values the app accepts (settings/loading.py)
JAVA_TOOL_OPTIONS = "JAVA_TOOL_OPTIONS"
EXECUTOR_OPTIONS = "spark.executor.extraJavaOptions"
C1_ONLY = "-XX:TieredStopAtLevel=1"


def names_the_jit(options: str) -> bool:
    """Whether JVM options choose the JIT themselves."""
    return "TieredStopAtLevel" in options or "TieredCompilation" in options


def chosen_elsewhere(env: dict[str, str]) -> bool:
    """Whether the user chose the JIT: STREAMING_APP_JVM_C1=0, or JAVA_TOOL_OPTIONS that
    name it."""
    return env.get(ENV, os.environ.get(ENV, "1")) == "0" or names_the_jit(
        env.get(JAVA_TOOL_OPTIONS, "")
    )


def executor_options(given: str | None, env: dict[str, str] | None = None) -> str | None:
    """spark.executor.extraJavaOptions for a cluster's executors: `given` (the user's, or
    None) with C1 only after it, unless STREAMING_APP_JVM_C1 is 0 or `driver`, or `given`
    names the JIT (then `given` as it is)."""
    choice = (os.environ if env is None else env).get(ENV, "1")
    if choice in ("0", DRIVER_ONLY) or names_the_jit(given or ""):
        return given
    return f"{given} {C1_ONLY}".strip() if given else C1_ONLY


def jit_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a driver JVM the app launches: C1 only, unless the user chose (above)."""
    if chosen_elsewhere(env):
        return env
    given = env.get(JAVA_TOOL_OPTIONS, "")
    return {**env, JAVA_TOOL_OPTIONS: f"{given} {C1_ONLY}".strip()}


if __name__ == "__main__":  # scripts/submit.sh: the JAVA_TOOL_OPTIONS to export
    print(jit_env(dict(os.environ)).get(JAVA_TOOL_OPTIONS, ""))
