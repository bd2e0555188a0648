# Sourced by Spark's scripts (spark-class, start-master.sh, start-worker.sh, spark-submit) when
# SPARK_CONF_DIR is this directory: hands the cluster's secret to the JVM through Spark's own
# variable, from the file STREAMING_APP_SPARK_SECRET_FILE names (docs/security.md). The file
# must not be readable by group or others.
if [ -n "${STREAMING_APP_SPARK_SECRET_FILE:-}" ]; then
    if [ ! -r "$STREAMING_APP_SPARK_SECRET_FILE" ]; then
        echo "spark-env.sh: STREAMING_APP_SPARK_SECRET_FILE $STREAMING_APP_SPARK_SECRET_FILE: not readable" >&2
        exit 2
    fi
    case "$(stat -c %a "$STREAMING_APP_SPARK_SECRET_FILE")" in
        [0-7]00) ;;
        *) echo "spark-env.sh: STREAMING_APP_SPARK_SECRET_FILE $STREAMING_APP_SPARK_SECRET_FILE: readable or writable by others; chmod 600 it" >&2
           exit 2 ;;
    esac
    _SPARK_AUTH_SECRET="$(head -n 1 "$STREAMING_APP_SPARK_SECRET_FILE" | tr -d '[:space:]')"
    export _SPARK_AUTH_SECRET
fi
