"""conf/log4j2.properties: what Spark logs about a lost executor is one line, other traces stay.

Logs through log4j in a JVM started as the app starts Spark's (pyspark's gateway, with
`conf/` as SPARK_CONF_DIR), and reads what it printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
CONF = Path(__file__).resolve().parents[2] / "conf"
# A message with a stack trace in its text (as a lost task's FetchFailed), then one with
# an exception (as the cleaner's timeout), from the logger named in argv[1].
LOG_TWICE = """
import sys
from pyspark.java_gateway import launch_gateway
jvm = launch_gateway().jvm
logger = jvm.org.apache.logging.log4j.LogManager.getLogger(sys.argv[1])
trace = "\\norg.Missing\\n\\tat org.X.y(X.scala:1)\\n"
logger.warn("Lost task 0.1 (TID 7): FetchFailed(message=" + trace + ")")
logger.error("Error cleaning RDD 9", jvm.java.lang.RuntimeException("Future timed out"))
"""


def logged(logger: str) -> list[str]:
    """The lines a JVM with the app's log configuration printed for LOG_TWICE."""
    env = dict(os.environ, SPARK_CONF_DIR=str(CONF), SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(
        [sys.executable, "-c", LOG_TWICE, logger],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


@pytest.mark.parametrize(
    "logger",
    [
        "org.apache.spark.scheduler.TaskSetManager",
        "org.apache.spark.storage.BlockManagerMasterEndpoint",
        "org.apache.spark.ContextCleaner",
    ],
)
def test_a_lost_executors_loggers_print_one_line_each(logger: str) -> None:
    name = logger.rsplit(".", 1)[1]
    lines = [line for line in logged(logger) if f" {name}: " in line or "\tat " in line]
    assert len(lines) == 2, lines
    assert lines[0].endswith(
        f"WARN {name}: Lost task 0.1 (TID 7): FetchFailed(message= (trace omitted)"
    ), lines
    assert lines[1].endswith(f"ERROR {name}: Error cleaning RDD 9: Future timed out"), lines


def test_other_loggers_keep_their_traces() -> None:
    """A batch that fails for good is logged with its trace (JobScheduler), as before."""
    output = "\n".join(logged("org.apache.spark.streaming.scheduler.JobScheduler"))
    assert "\tat org.X.y(X.scala:1)" in output
    assert "java.lang.RuntimeException: Future timed out" in output
