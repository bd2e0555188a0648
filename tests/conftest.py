"""Settings for every JVM the tests start (unit tests' in-process Spark, the app's drivers,
the standalone master, workers and executors, spark-submit).

The tests' JVMs live for seconds to a few minutes: Java's optimizing compiler (C2) spent
most of an idle test app's CPU compiling code it never ran long enough to gain from
(measured, 2026-11-29: the first 40 s of an idle files app took 0.88 CPU-seconds a second
with it, 0.60 with C1 only, and its first batch came 2 s sooner). CI's two cores are what
its time is spent on, so the tests' JVMs stop at C1 (`-XX:TieredStopAtLevel=1`).

Every JVM of the tests: the app itself does the same only for the driver JVM it launches
or scripts/submit.sh launches (streaming_app/common/jvm_jit.py), and a JAVA_TOOL_OPTIONS of the
caller's own is left as it is (set it, empty or not, to run the tests with Java's
defaults). Each JVM prints `Picked up JAVA_TOOL_OPTIONS: ...` first,
on stderr.
"""

from __future__ import annotations

import os

import pytest

from tests import slow_shares

TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow-share",
        default=os.environ.get("STREAMING_APP_SLOW_SHARE") or None,
        metavar="K/N",
        help="mark share K of N of the `slow` tests `ci_share` (tests/slow_shares.py), so "
        "that -m 'not slow or ci_share' runs them too; .ci/run picks K from the commit "
        "(env: STREAMING_APP_SLOW_SHARE)",
    )


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --slow-share K/N, the slow tests of share K get the `ci_share` marker, and go
    first, longest first: a share's test of 10-16 minutes started last would run alone
    at the end of a run of two processes (pytest-xdist's worksteal hands the rest to the
    other process meanwhile)."""
    text = config.getoption("--slow-share")
    if not text:
        return
    try:
        k, n = slow_shares.parse_share(text)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    slow = [item for item in items if item.get_closest_marker("slow")]
    shares = slow_shares.assign((item.nodeid for item in slow), n)
    chosen = [item for item in slow if shares.get(item.nodeid) == k]
    for item in chosen:
        item.add_marker(pytest.mark.ci_share)
    chosen.sort(key=lambda item: -slow_shares.seconds_of(item.nodeid))
    first = {id(item) for item in chosen}
    items[:] = chosen + [item for item in items if id(item) not in first]
