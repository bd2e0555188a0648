#!/usr/bin/env bash
# One command to a running demo on a fresh machine: sets up .venv on first use, then runs
# `streaming-app demo` (a bundled text served on a loopback port, counted live).
# Usage: scripts/demo.sh [demo options, e.g. --checkpoint-dir DIR --duration 60]
set -euo pipefail
. "$(dirname "$0")/_env.sh"
require_python
require_java
ensure_venv
exec streaming-app demo "$@"
