#!/usr/bin/env bash
# One command to run the test suite on a fresh machine: sets up .venv with the test extra
# on first use, then runs pytest. Extra arguments go to pytest (e.g. -m "not integration").
# Two test processes by default (pytest-xdist): an integration test's Spark waits for its
# batches about half the time, so on two cores the suite took 37 and 40 minutes this way
# against 56 in one process (docs/development.md). STREAMING_APP_TEST_WORKERS=N sets the
# number; `-n 0` (or STREAMING_APP_TEST_WORKERS=0) runs everything in one process.
set -euo pipefail
. "$(dirname "$0")/_env.sh"
workers="${STREAMING_APP_TEST_WORKERS:-2}"
case "$workers" in
    ''|*[!0-9]*) die "STREAMING_APP_TEST_WORKERS must be a whole number (0: one process), not '$workers'" ;;
esac
prepare_tests
set +e
# Arguments given after these (a later -n) take precedence.
python -m pytest -n "$workers" --dist worksteal "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "error: pytest collected no tests" >&2
    exit 1
fi
if [ "$rc" -eq 3 ]; then
    # pytest-xdist reports a usage error of a worker (an unknown marker in -m, say) as an
    # internal error, without pytest's own message.
    echo "error: pytest stopped with an internal error; if it came from the arguments, run again with -n 0 to see pytest's message" >&2
fi
exit "$rc"
