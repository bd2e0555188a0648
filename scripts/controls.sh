#!/usr/bin/env bash
# Runs the controls of docs/guarantees.md: each patch under tests/controls/ is applied to a
# scratch copy of this tree, and the CI tests its row names must fail there and pass
# without it (tests/controls/run.py). Arguments: control names (default: all); --keep
# keeps the copies and logs. Sets up .venv like scripts/test.sh.
set -euo pipefail
. "$(dirname "$0")/_env.sh"
prepare_tests
exec python -m tests.controls.run "$@"
