#!/usr/bin/env bash
# One command to run the test suite on a fresh machine: sets up .venv with the test extra
# on first use, then runs pytest. Extra arguments go to pytest (e.g. -m "not integration").
set -euo pipefail
. "$(dirname "$0")/_env.sh"
require_python
require_java
ensure_venv test
cd "$ROOT"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
set +e
python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "error: pytest collected no tests" >&2
    exit 1
fi
exit "$rc"
