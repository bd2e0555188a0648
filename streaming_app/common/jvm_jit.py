"""The driver JVM's JIT on a local master: C1 only, not minutes of compiling at start.

In `local[*]` the driver JVM is also the executor: it schedules the tasks, moves the
Python workers' bytes, shuffles and caches them, and HotSpot compiles its hot methods
meanwhile. Measured on the project's 2-core machines (bench/NOTES-perf.md), the JIT's
compiler threads were the largest CPU consumer of a Kafka run in its first half
minute: 10 ms of CPU per 1000 lines, more than the Python workers' counting, on cores
the workers need. `-XX:TieredStopAtLevel=1` keeps HotSpot's quick C1 compiler and skips
the optimizing C2: what the JVM does here is mostly moving bytes, which C1's code does
about as fast (the side-by-side runs in the notes, after a short and a longer warm-up).

Only for a JVM the app launches itself on a local master (spark_env.launching_jvm):
under spark-submit, or on a cluster, the JVMs are someone else's. `JAVA_TOOL_OPTIONS`
carries it (the JVM says "Picked up JAVA_TOOL_OPTIONS" on stderr), after any of the
user's; a user's own `TieredStopAtLevel`, `TieredCompilation` or `STREAMING_APP_JVM_C1=0`
leaves the JIT as it is.
"""

from __future__ import annotations

import os

ENV = "STREAMING_APP_JVM_C1"
JAVA_TOOL_OPTIONS = "JAVA_TOOL_OPTIONS"
C1_ONLY = "-XX:TieredStopAtLevel=1"


def launch_master(command: list[str]) -> str | None:
    """The `--master` of a spark-submit command, if it has one."""
    for index, option in enumerate(command):
        if option == "--master" and index + 1 < len(command):
            return command[index + 1]
        if option.startswith("--master="):
            return option.split("=", 1)[1]
    return None


def jit_env(command: list[str], env: dict[str, str]) -> dict[str, str]:
    """`env` for the JVM that `command` launches: C1 only on a local master (see above)."""
    master = launch_master(command)
    given = env.get(JAVA_TOOL_OPTIONS, "")
    if (
        master is None
        or not master.startswith("local")
        or env.get(ENV, os.environ.get(ENV, "1")) == "0"
        or "TieredStopAtLevel" in given
        or "TieredCompilation" in given
    ):
        return env
    return {**env, JAVA_TOOL_OPTIONS: f"{given} {C1_ONLY}".strip()}
