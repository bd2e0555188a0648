"""Settings for every JVM the tests start (unit tests' in-process Spark, the app's drivers,
the standalone master, workers and executors, spark-submit).

The tests' JVMs live for seconds to a few minutes: Java's optimizing compiler (C2) spent
most of an idle test app's CPU compiling code it never ran long enough to gain from
(measured, 2026-11-29: the first 40 s of an idle files app took 0.88 CPU-seconds a second
with it, 0.60 with C1 only, and its first batch came 2 s sooner). CI's two cores are what
its time is spent on, so the tests' JVMs stop at C1 (`-XX:TieredStopAtLevel=1`).

Only the tests: the app, `bench/` and the README's run command keep Java's defaults, and
a JAVA_TOOL_OPTIONS of the caller's own is left as it is (set it, empty or not, to run
the tests with Java's defaults). Each JVM prints `Picked up JAVA_TOOL_OPTIONS: ...` first,
on stderr.
"""

from __future__ import annotations

import os

TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)
