# Sourced by Spark's scripts (spark-class, start-master.sh, start-worker.sh, spark-submit) when
# SPARK_CONF_DIR is this directory: hands the cluster's secret to the JVM through Spark's own
# variable, from the file STREAMING_APP_SPARK_SECRET_FILE names (docs/security.md). Read by
# the app's own reader (streaming_app/lifecycle/secret_file.py, standard library only): one
# open that never waits (a FIFO swapped in for the file) nor reads a device, then, on what
# was opened, a regular file (a link is followed) of the user the daemon runs as that
# neither group nor others may read or write; the secret is its first line without the
# spaces around it, and may not be empty. The Python that runs it: STREAMING_APP_PYTHON,
# else PYSPARK_PYTHON, else python3; it must have the app installed (the workers' Python
# does, for the app's worker daemon); without it the daemon refuses to start.

# The web UIs (the master's 8080, a worker's 8081, the driver's 4040) authenticate nobody, and
# Spark binds them to SPARK_LOCAL_IP, else to every address (WebUI.bind, Spark 4.3): loopback
# here keeps them from other hosts; an operator reaches them through an SSH tunnel or an
# authenticating proxy on the host (docs/security.md). Spark's RPC stays where it was told:
# the master and each worker bind their --host, the driver its spark.driver.host, and an
# executor its worker's; so give each of them (unset, each takes SPARK_LOCAL_IP's loopback).
# A SPARK_LOCAL_IP of yours is kept: 0.0.0.0 or an address opens the UIs there, on purpose.
SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
if [ -n "${STREAMING_APP_SPARK_SECRET_FILE:-}" ]; then
    _sa_python="${STREAMING_APP_PYTHON:-${PYSPARK_PYTHON:-python3}}"
    if ! "$_sa_python" -c 'import streaming_app.lifecycle.secret_file' 2>/dev/null; then
        echo "spark-env.sh: STREAMING_APP_SPARK_SECRET_FILE $STREAMING_APP_SPARK_SECRET_FILE: cannot check it: $_sa_python has no streaming_app; set STREAMING_APP_PYTHON to a Python that has the app installed" >&2
        exit 2
    fi
    # The secret goes through a pipe, never a command line; the reader's one line is its.
    _SPARK_AUTH_SECRET="$("$_sa_python" -m streaming_app.lifecycle.secret_file "$STREAMING_APP_SPARK_SECRET_FILE")" \
        || exit 2
    export _SPARK_AUTH_SECRET
    unset _sa_python
fi
