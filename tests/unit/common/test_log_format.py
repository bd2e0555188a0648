"""Executor-side warnings: the driver's format in a Python worker that set no logging up."""

from __future__ import annotations

import re
import subprocess
import sys

WORKER = """
import logging
from streaming_app.common.log_format import ensure_worker_logging
log = logging.getLogger("streaming_app.sources.kafka.reader")
log.warning("before: logging's last resort")
ensure_worker_logging()
ensure_worker_logging()  # once is enough: no second handler, no line twice
log.warning("reading topic=t partition=0: broker unreachable (OSError, attempt 1); retrying")
log.info("not shown: warnings and above only")
"""


def test_a_worker_logs_warnings_with_time_level_and_logger_once() -> None:
    done = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "before: logging's last resort"  # what a worker printed before
    assert len(lines) == 2, lines
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING streaming_app\.sources\.kafka\.reader: "
        r"reading topic=t partition=0: broker unreachable \(OSError, attempt 1\); retrying",
        lines[1],
    ), lines
