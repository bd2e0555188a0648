#!/usr/bin/env bash
# Runs the controls of docs/guarantees.md: each patch under tests/controls/ is applied to a
# scratch copy of this tree, and the CI tests its row names must fail there and pass
# without it (tests/controls/run.py). Arguments: control names (default: all); --keep
# keeps the copies and logs. Sets up .venv like scripts/test.sh.
set -euo pipefail
. "$(dirname "$0")/_env.sh"
require_python
require_java
ensure_venv test
ensure_jvm_archive
cd "$ROOT"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
exec python -m tests.controls.run "$@"
