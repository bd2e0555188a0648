# Shared set-up for the scripts: checks Python and Java, creates the virtualenv on first
# use and (re)installs the package when setup.cfg changes. Source it; do not run it.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STREAMING_APP_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

die() { echo "error: $*" >&2; exit 2; }

require_python() {
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3.10 or newer"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || die "Python 3.10 or newer is needed; $PYTHON is $("$PYTHON" -V 2>&1)"
    "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
        || die "$PYTHON lacks venv/ensurepip; on Debian/Ubuntu: apt-get install python3-venv"
}

require_java() {
    local java="java"
    [ -n "${JAVA_HOME:-}" ] && java="$JAVA_HOME/bin/java"
    command -v "$java" >/dev/null 2>&1 \
        || die "Java 17 or 21 is needed by PySpark 4 and was not found; install it (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    local version
    version="$("$java" -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -1)"
    [ -n "$version" ] && [ "$version" -ge 17 ] \
        || die "PySpark 4 needs Java 17 or 21; $java is version ${version:-unknown}"
}

# ensure_venv [EXTRA]: the virtualenv with the package installed (editable), plus an extra.
ensure_venv() {
    local extra="${1:-}" spec="." stamp want hash
    [ -n "$extra" ] && spec=".[$extra]"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "==> creating virtualenv $VENV" >&2
        "$PYTHON" -m venv "$VENV" || die "could not create virtualenv $VENV"
    fi
    stamp="$VENV/.streaming-app-installed"
    hash="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
    want="$hash $spec"
    # Any install of this setup.cfg satisfies the plain package; an extra needs its own.
    # The test extra includes the broker extra.
    if [ ! -f "$stamp" ] || ! { grep -qxF "$want" "$stamp" \
            || { [ -z "$extra" ] && grep -q "^$hash " "$stamp"; } \
            || { [ "$extra" = broker ] && grep -qxF "$hash .[test]" "$stamp"; }; }; then
        echo "==> installing streaming-app$([ -n "$extra" ] && echo "[$extra]") into $VENV (first run downloads PySpark, ~450 MB)" >&2
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2 || die "pip upgrade failed"
        (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet -e "$spec") >&2 \
            || die "installing streaming-app failed (see pip's message above)"
        echo "$want" >> "$stamp"
    fi
    export PATH="$VENV/bin:$PATH"
}

# ensure_jvm_archive: the driver JVM's class-data archive in the virtualenv, made once per
# JDK and PySpark (streaming_app/common/jvm_archive.py); the JVM starts faster from it.
# Without one, Spark starts as before: a failure is a warning.
ensure_jvm_archive() {
    "$VENV/bin/python" -m streaming_app.common.jvm_archive "$ROOT/conf" \
        || true  # it says why itself; Spark starts without one
}

# prepare_tests: what running the test suite needs (scripts/test.sh, scripts/controls.sh):
# Python, Java, the virtualenv with the test extra, the JVM's class archive, loopback.
prepare_tests() {
    require_python
    require_java
    ensure_venv test
    ensure_jvm_archive
    cd "$ROOT"
    export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
}
