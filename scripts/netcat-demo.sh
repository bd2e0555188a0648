#!/usr/bin/env bash
# The classic netcat demo with the real `nc -lk`: type words, watch the counts.
# Usage: scripts/netcat-demo.sh [PORT] [-- extra `streaming-app run` options]
# The app runs in the background against 127.0.0.1:PORT (default 9999) with its checkpoint
# in ./netcat-checkpoint; nc runs in the foreground. Ctrl-C stops both (the app gracefully).
set -euo pipefail
. "$(dirname "$0")/_env.sh"
port="9999"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then port="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
command -v nc >/dev/null 2>&1 \
    || die "nc (netcat) not found; install it (Debian/Ubuntu: apt-get install netcat-openbsd), or run scripts/demo.sh, which needs nothing"
require_python
require_java
ensure_venv

# setsid: Ctrl-C goes to nc and this script; the app gets exactly one SIGTERM from the trap.
setsid streaming-app run --source socket --host 127.0.0.1 --port "$port" \
    --checkpoint-dir "${NETCAT_CHECKPOINT_DIR:-netcat-checkpoint}" "$@" &
app=$!
echo "==> streaming-app running as pid $app" >&2
stop_app() {
    trap - EXIT INT TERM
    kill -TERM "$app" 2>/dev/null || true
    wait "$app" 2>/dev/null || true
}
trap stop_app EXIT INT TERM
echo "==> type words and press Enter; counts appear every batch. Ctrl-C stops." >&2
# -k: keep listening after the receiver reconnects; the app's receiver retries until nc is up.
nc -lk 127.0.0.1 "$port"
