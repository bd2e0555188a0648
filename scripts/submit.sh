#!/usr/bin/env bash
# Run streaming-app with spark-submit (client mode) against any master.
# Usage: scripts/submit.sh [spark-submit options, e.g. --master spark://HOST:7077] \
#            [-- streaming-app run options, e.g. --config conf/cluster.ini]
# The executors get the app's code one of two ways (STREAMING_APP_CODE):
#   zip        build dist/streaming_app-pyfiles.zip (the package plus its pure-Python
#              dependencies that executors import: kafka-python, and psycopg, which loads
#              the worker's libpq unless its Python has psycopg[binary]) and ship it with
#              --py-files: the driver's file server hands it to any host that asks;
#   installed  the workers' Python (PYSPARK_PYTHON) has the app installed: nothing is
#              shipped, and the executors fork their workers from the app's daemon.
# The default: installed on a secured cluster (authentication on by any of its ways:
# spark_secret_file from --spark-secret-file, the config file or
# STREAMING_APP_SPARK_SECRET_FILE; spark.authenticate true in --spark-conf, spark-submit's
# --conf or --properties-file, or $SPARK_CONF_DIR/spark-defaults.conf), zip otherwise
# (streaming_app/cli/submit_plan.py decides, and says why).
# Python apps cannot use standalone cluster deploy mode, so the driver runs here;
# supervise it from outside.
# A secured cluster (docs/security.md): SPARK_CONF_DIR=conf/secure and
# STREAMING_APP_SPARK_SECRET_FILE=FILE (mode 600) here as on the master and workers.
set -euo pipefail
. "$(dirname "$0")/_env.sh"
require_python
require_java
ensure_venv

submit_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do submit_args+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift

export SPARK_CONF_DIR="${SPARK_CONF_DIR:-$ROOT/conf}"
code="${STREAMING_APP_CODE:-}"
if [ -z "$code" ]; then
    # Secured however authentication is turned on (the flag, the config file, the
    # environment, --conf, spark-defaults.conf), read as the app reads it: installed.
    code="$("$VENV/bin/python" -m streaming_app.cli.submit_plan \
        ${submit_args[@]+"${submit_args[@]}"} -- "$@")" || exit $?
fi
ship=()
case "$code" in
installed)
    # Nothing for the driver's file server to hand out; the workers' Python has the app.
    ship=(--conf spark.python.daemon.module=streaming_app.lifecycle.worker_daemon)
    echo "==> the executors import the app installed in their Python (STREAMING_APP_CODE=installed); nothing shipped" >&2
    ;;
zip)
mkdir -p "$ROOT/dist"
zip_path="$ROOT/dist/streaming_app-pyfiles.zip"
python - "$ROOT" "$zip_path" <<'PY'
import os, sys, zipfile
import kafka  # executors of the Kafka source import it
import psycopg  # executors of the postgres sink stage its rows (its pure-Python part: libpq's)

root, target = sys.argv[1], sys.argv[2]
packages = [
    os.path.join(root, "streaming_app"),
    os.path.dirname(kafka.__file__),
    os.path.dirname(psycopg.__file__),
]
tmp = f"{target}.{os.getpid()}.tmp"  # concurrent builds must not share it
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
    for package in packages:
        base = os.path.dirname(package)
        for folder, dirs, files in os.walk(package):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if not name.endswith((".pyc", ".pyo")):
                    path = os.path.join(folder, name)
                    archive.write(path, os.path.relpath(path, base))
os.replace(tmp, target)
PY
echo "==> built $zip_path, shipped with --py-files (STREAMING_APP_CODE=zip)" >&2
ship=(--py-files "$zip_path")
    ;;
*)
    echo "error: STREAMING_APP_CODE must be zip or installed, not '$code'" >&2
    exit 2
    ;;
esac

# Executors and the driver run the virtualenv's Python unless told otherwise; on a
# real cluster set PYSPARK_PYTHON to a Python of the same minor version on the workers.
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$VENV/bin/python}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$VENV/bin/python}"
# The driver JVM decodes file names by the locale: under LC_ALL=C as ASCII, and the files
# source would never read a file whose name is not ASCII (the app refuses to start then).
case "${LC_ALL:-${LC_CTYPE:-${LANG:-POSIX}}}" in
*[Uu][Tt][Ff]-8 | *[Uu][Tt][Ff]8) ;;
*) export LC_ALL=C.UTF-8 ;;
esac
# The driver JVM compiles with HotSpot's C1 only (streaming_app/common/jvm_jit.py): on a
# cluster it moves no rows, and C2's compiling was most of its CPU in a run's first
# minutes. STREAMING_APP_JVM_C1=0, or a JAVA_TOOL_OPTIONS or --driver-java-options of
# your own that names the JIT, keeps Java's. The app gives the executors' JVMs the same
# through spark.executor.extraJavaOptions (STREAMING_APP_JVM_C1=driver: not them).
tool_options="$("$VENV/bin/python" -m streaming_app.common.jvm_jit)"
if [ -n "$tool_options" ]; then export JAVA_TOOL_OPTIONS="$tool_options"; fi
exec spark-submit --name streaming-app ${ship[@]+"${ship[@]}"} \
    ${submit_args[@]+"${submit_args[@]}"} "$ROOT/scripts/spark_main.py" run "$@"
