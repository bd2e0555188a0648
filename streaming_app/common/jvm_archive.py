"""The driver JVM's class-data archive: a JVM that starts from it reaches its first batch sooner.

Spark's driver loads and verifies over ten thousand classes from some 250 jars at every
start. Java's class-data sharing (AppCDS, `-XX:SharedArchiveFile`) keeps them, parsed and
verified, in one file the JVM maps instead: measured side by side on the project's 2-core
machine, a DStream run on files reached its first batch 1.2 s sooner (7.2 s), a structured
one 6.3 s sooner (12.7 s) (docs/operations.md). `python -m streaming_app.common.jvm_archive
conf` writes the archive once per virtualenv, JDK and PySpark (`scripts/test.sh` does, in
about 35 s the first time); a JVM that the app launches itself then starts from it
(spark_env.launching_jvm).

Java keeps no class path directory that holds files in an archive, and Spark's launcher
puts SPARK_CONF_DIR first on the driver's class path. So a JVM that uses the archive gets
an empty conf directory instead, and the two files of the repository's `conf/` by option:
`--properties-file spark-defaults.conf` and `-Dlog4j2.configurationFile=log4j2.properties`.
That is done only for that `conf/`, whose files are known; a conf directory of the user's
own, spark-submit and `STREAMING_APP_JVM_ARCHIVE=0` launch the JVM as before. An archive
the JVM cannot use (another JDK, changed jars) is ignored by the JVM, silently: the start
is as slow as without one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streaming_app.common.java import java_binary

log = logging.getLogger(__name__)

# "0" turns the archive off for the JVMs the app launches.
ENV = "STREAMING_APP_JVM_ARCHIVE"
# The repository conf/ files the launch passes by option; any other file there (a user's
# metrics.properties, say) would be lost with the conf directory, so none may be present
# beyond these and the app's own .ini files.
SPARK_DEFAULTS = "spark-defaults.conf"
LOG4J = "log4j2.properties"
# The JVM warns on stdout when it cannot use an archive; it then starts without it.
QUIET = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
BUILD_TIMEOUT_S = 900
EXTRA_JAVA = "spark.driver.extraJavaOptions"
JAVA_OPTIONS = "--driver-java-options"
PROPERTIES = "--properties-file"


def archive_dir() -> Path:
    """Where the archive lives: in the virtualenv (or Python prefix) it was made for."""
    return Path(sys.prefix) / "share" / "streaming-app"


def empty_conf_dir() -> Path:
    """The conf directory a JVM that uses the archive gets: empty, made on first use."""
    path = archive_dir() / "empty-conf"
    path.mkdir(parents=True, exist_ok=True)
    return path


def archive_path() -> Path | None:
    """The archive for this JDK and PySpark (whether or not it exists), None without Java."""
    java = java_binary()
    if java is None or not os.path.exists(java):
        return None
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    key = hashlib.sha256()
    real = os.path.realpath(java)
    stat = os.stat(real)
    key.update(f"{pyspark.__version__}\0{real}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    for jar in sorted(jars.glob("*.jar")):
        key.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
    return archive_dir() / f"spark-driver-{key.hexdigest()[:16]}.jsa"


def usable_archive(conf_dir: str | None, repo_conf: str | None) -> Path | None:
    """The archive a JVM launched with `conf_dir` as SPARK_CONF_DIR can start from, if any.

    `repo_conf` is the repository's conf/ (spark_env.repo_conf_dir), the only one it takes.
    """
    if os.environ.get(ENV, "1") == "0" or conf_dir is None or conf_dir != repo_conf:
        return None
    conf = Path(conf_dir)
    # Spark reads no subdirectory of a conf directory (conf/secure/ is one of its own).
    if any(
        p.name not in (SPARK_DEFAULTS, LOG4J) and p.suffix != ".ini" and not p.is_dir()
        for p in conf.iterdir()
    ):
        return None
    # The launch's --driver-java-options would replace the file's own; a class path of its
    # own does not match the archive's.
    defaults = (conf / SPARK_DEFAULTS).read_text("utf-8", errors="replace")
    if EXTRA_JAVA in defaults or "spark.driver.extraClassPath" in defaults:
        return None
    path = archive_path()
    return path if path is not None and path.is_file() else None


def submit_options(conf_dir: str, java_option: str, given_java: str = "") -> list[str]:
    """spark-submit options that give the JVM `conf_dir`'s two files and `java_option`.

    `given_java` is a spark.driver.extraJavaOptions of the user's: kept, before ours.
    """
    conf = Path(conf_dir)
    java = [java_option, *QUIET, f"-Dlog4j2.configurationFile={(conf / LOG4J).as_uri()}"]
    options = " ".join(part for part in (given_java, shlex.join(java)) if part)
    return [PROPERTIES, str(conf / SPARK_DEFAULTS), JAVA_OPTIONS, options]


def launch(
    command: list[str], env: dict[str, str], repo_conf: str | None
) -> tuple[list[str], dict[str, str]]:
    """The command and environment of a JVM launch that starts from the archive.

    `command` is PySpark's spark-submit command, ending in `pyspark-shell`; it is returned
    unchanged when the archive does not apply (see usable_archive).
    """
    conf_dir = env.get("SPARK_CONF_DIR")
    if not command or command[-1] != "pyspark-shell":
        return command, env
    archive = usable_archive(conf_dir, repo_conf)
    if archive is None or conf_dir is None:
        return command, env
    # spark-submit keeps the last of an option given twice: the options the archive's launch
    # adds would replace the user's own (in PYSPARK_SUBMIT_ARGS). Java options are taken
    # along, before the archive's; a properties file of the user's is left to work alone.
    rest, given = [], []
    args = iter(command[:-1])
    for arg in args:
        value = next(args, "") if arg in ("--conf", JAVA_OPTIONS, PROPERTIES) else None
        if arg == PROPERTIES:
            log.info("the JVM class archive is not used: PYSPARK_SUBMIT_ARGS names %s", arg)
            return command, env
        if arg == JAVA_OPTIONS:
            given.append(value or "")
        elif value is not None and arg == "--conf" and value.startswith(f"{EXTRA_JAVA}="):
            given.append(value.split("=", 1)[1])
        else:
            rest += [arg] if value is None else [arg, value]
    options = submit_options(
        conf_dir, f"-XX:SharedArchiveFile={archive}", " ".join(g for g in given if g)
    )
    return [*rest, *options, command[-1]], {
        **env,
        "SPARK_CONF_DIR": str(empty_conf_dir()),
    }


# The workload whose classes the archive keeps: what the app's two engines load to start
# and run their first batches (a streaming aggregation written by foreachBatch, a DStream
# with updateStateByKey and a checkpoint). Run in a JVM of its own, which writes the archive
# when it exits: the script waits for that.
WORKLOAD = r"""
import sys, time
from pathlib import Path
from pyspark import SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession, functions as F
from pyspark.streaming import StreamingContext

work = Path(sys.argv[1])
(work / "in").mkdir()
(work / "in" / "a.txt").write_text("a b c\nb c\n")
gateway = launch_gateway()
sc = SparkContext(gateway=gateway)
spark = SparkSession(sc)
spark.conf.set("spark.sql.shuffle.partitions", "2")
# The structured engine's state store (structured/session.py): its classes too.
spark.conf.set("spark.sql.streaming.stateStore.providerClass",
               "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")

def pairs(batches):
    import pyarrow as pa
    for batch in batches:
        words = [w for line in batch.column(0).to_pylist() for w in line.split()]
        yield pa.RecordBatch.from_pydict({"k": words, "v": [1] * len(words)})

totals = (spark.readStream.text(str(work / "in")).mapInArrow(pairs, "k string, v long")
          .groupBy("k").agg(F.sum("v").alias("n")))
seen = []
query = (totals.writeStream.outputMode("update")
         .foreachBatch(lambda df, i: seen.append(df.collect()))
         .option("checkpointLocation", str(work / "structured")).trigger(availableNow=True).start())
query.awaitTermination()
assert seen, "the streaming aggregation wrote nothing"

ssc = StreamingContext(sc, 1)
ssc.checkpoint(str(work / "dstream"))
queue = [sc.parallelize(["a b", "b c"]), sc.parallelize(["c d"])]
counted = []
(ssc.queueStream(queue).flatMap(str.split).map(lambda w: (w, 1))
    .updateStateByKey(lambda new, old: sum(new) + (old or 0))
    .foreachRDD(lambda rdd: counted.append(rdd.collect())))
ssc.start()
deadline = time.time() + 120
while len(counted) < 3 and time.time() < deadline:
    time.sleep(0.2)
ssc.stop(stopSparkContext=True, stopGraceFully=True)
assert counted, "the DStream wrote nothing"
gateway.shutdown()
gateway.proc.stdin.close()  # the JVM exits, and writes the archive as it does
sys.exit(gateway.proc.wait())
"""


def build(conf_dir: str | None, force: bool = False) -> Path:
    """Write the archive for this JDK and PySpark unless it exists; return its path.

    `conf_dir` is the repository's conf/ (spark_env.repo_conf_dir). Raises RuntimeError
    with one line (and the workload's output in a log file beside the archive) when the
    JVM could not write it.
    """
    path = archive_path()
    if path is None:
        raise RuntimeError("no Java found (JAVA_HOME or java on PATH): no archive to make")
    if conf_dir is None:
        raise RuntimeError("no conf/ directory of a source checkout: the archive is for it")
    if path.is_file() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    log_path = path.with_name("build.log")
    env = dict(
        os.environ,
        SPARK_CONF_DIR=str(empty_conf_dir()),
        SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_SUBMIT_ARGS=shlex.join(
            ["--master", "local[2]",
             *submit_options(conf_dir, f"-XX:ArchiveClassesAtExit={partial}"), "pyspark-shell"]
        ),
    )  # fmt: skip
    started = time.monotonic()
    print(f"==> writing the driver JVM's class archive {path} (once)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as work, open(log_path, "w") as log:
        try:
            done = subprocess.run(
                [sys.executable, "-c", WORKLOAD, work],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
            code: int | str = done.returncode
        except subprocess.TimeoutExpired:
            code = f"no end within {BUILD_TIMEOUT_S} s"
    if code != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM wrote no class archive (exit {code}); its output: {log_path}")
    os.replace(partial, path)  # whole or not at all: a torn archive crashes the JVM
    for old in path.parent.glob("spark-driver-*.jsa"):
        if old != path:
            old.unlink(missing_ok=True)
    print(f"wrote {path} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return path


def main(argv: list[str]) -> int:
    """`python -m streaming_app.common.jvm_archive CONF_DIR [--force]`: make it if missing.

    CONF_DIR is the repository's conf/ (scripts/_env.sh passes it).
    """
    paths = [arg for arg in argv if arg != "--force"]
    if len(paths) != 1 or not (Path(paths[0]) / SPARK_DEFAULTS).is_file():
        print(
            "usage: python -m streaming_app.common.jvm_archive CONF_DIR [--force] "
            f"(CONF_DIR: the repository's conf/, with {SPARK_DEFAULTS})",
            file=sys.stderr,
        )
        return 2
    try:
        build(str(Path(paths[0]).resolve()), force="--force" in argv)  # `conf` works too
    except RuntimeError as exc:
        print(f"warning: {exc}; Spark starts without one", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
