# Sourced by Spark's scripts (spark-class, start-master.sh, start-worker.sh, spark-submit) when
# SPARK_CONF_DIR is this directory: hands the cluster's secret to the JVM through Spark's own
# variable, from the file STREAMING_APP_SPARK_SECRET_FILE names (docs/security.md). Read as
# the app reads it (lifecycle/spark_secret.py): a regular file (a link is followed) of the
# user the daemon runs as, that neither group nor others may read or write, checked once
# opened; the secret is its first line without the spaces around it, and may not be empty.
if [ -n "${STREAMING_APP_SPARK_SECRET_FILE:-}" ]; then
    _sa_file="$STREAMING_APP_SPARK_SECRET_FILE"
    _sa_refuse() {
        echo "spark-env.sh: STREAMING_APP_SPARK_SECRET_FILE $_sa_file: $1" >&2
        exit 2
    }
    # A FIFO would hang the open, a device would be read: only a regular file is opened.
    [ -f "$_sa_file" ] || _sa_refuse "not a regular file, or not there"
    exec 9<"$_sa_file" || _sa_refuse "cannot read it"
    # The open file's owner and mode (what was opened, not the name looked up again).
    [ "$(stat -L -c %u /dev/fd/9)" = "$(id -u)" ] \
        || _sa_refuse "owned by uid $(stat -L -c %u /dev/fd/9), not by the user the daemon runs as (uid $(id -u)); chown it to the service user"
    case "$(stat -L -c %a /dev/fd/9)" in
        [0-7]00) ;;
        *) _sa_refuse "readable or writable by others; chmod 600 it" ;;
    esac
    IFS= read -r _SPARK_AUTH_SECRET <&9 || true  # a last line without its newline too
    exec 9<&-
    _SPARK_AUTH_SECRET="${_SPARK_AUTH_SECRET#"${_SPARK_AUTH_SECRET%%[![:space:]]*}"}"
    _SPARK_AUTH_SECRET="${_SPARK_AUTH_SECRET%"${_SPARK_AUTH_SECRET##*[![:space:]]}"}"
    [ -n "$_SPARK_AUTH_SECRET" ] || _sa_refuse "empty, or its first line blank"
    export _SPARK_AUTH_SECRET
    unset -f _sa_refuse
    unset _sa_file
fi
