#!/usr/bin/env bash
# A throwaway Kafka-protocol broker (tansu, memory storage) on 127.0.0.1 for trying the
# Kafka source by hand; Ctrl-C stops it and its data is gone.
# Usage: scripts/kafka-dev.sh [PORT]        (default 9092; 0 picks a free port)
set -euo pipefail
. "$(dirname "$0")/_env.sh"
require_python
ensure_venv broker
exec streaming-app dev-broker --port "${1:-9092}"
