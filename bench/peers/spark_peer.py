"""Spark's own word count as a subprocess: the Structured Streaming side of the benchmarks.

    python bench/peers/spark_peer.py --checkpoint-dir DIR --progress-file FILE
                               (--input-dir DIR | --kafka BOOTSTRAP,TOPIC,CAP)
                               [--engine-settings] [--app-tokenizer]
                               [--app-output | --app-postgres DSN,TABLE]

`groupBy(word).count()` in update mode to the `noop` sink, 2 s processing-time triggers,
one JSON line per progress to the progress file, until SIGTERM. bench/peers/peer.py runs it on
files with Spark's defaults; bench/peers/engines.py and bench/peers/plain.py with the structured
engine's settings and JVM launch, on Kafka through the engine's own data source too, and
counting the words the engine counts. `StructuredRun` starts and watches one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.harness.app import BATCH_S, LOOPBACK_CONF, poll_until
from streaming_app.tools.processes import kill_group, stop_group

# The run counts the words of the DStream jobs' tokenizer (structured/pairs.py) instead
# of those of Spark's split.
APP_TOKENIZER = "--app-tokenizer"
ENGINE_SETTINGS = "--engine-settings"
# The app's output in the exact configuration, written the way Spark's docs write a
# foreachBatch sink: each micro-batch's changed totals as text and, every
# `EVERY_TOTAL_BATCHES`, every total twice (the files base and the snapshot).
APP_OUTPUT = "--app-output"
# The app's postgres output with the guides' pattern for an external system, from
# foreachBatch: `--app-postgres DSN,TABLE`, the micro-batch's changed totals upserted by each
# partition (foreachPartition, a connection each) in a transaction of its own, into a table
# of the app's layout (word, count; PostgreSQL's defaults otherwise).
APP_POSTGRES = "--app-postgres"
EVERY_TOTAL_BATCHES = 10  # the exact configuration's checkpoint interval, in batches
SHUFFLE_PARTITIONS = 2  # local[2]: one task per core; the default of 200 would be unfair
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


@dataclass
class StructuredRun:
    """The Structured Streaming word count as a subprocess (own session, like AppRun)."""

    proc: subprocess.Popen[bytes]
    progress: Path
    log: Path
    started: float  # time.time() at spawn

    @classmethod
    def start(
        cls, base: Path, input_dir: Path | None, checkpoint: Path, *extra: str
    ) -> StructuredRun:
        """Spawn `python bench/peers/spark_peer.py` with its progress file in base.

        extra: more of its arguments (`--kafka`, `--engine-settings`); without `--kafka` it
        reads input_dir. A restart on the same base appends to the same progress file."""
        progress, log = base / "structured.progress.jsonl", base / "structured.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMING_APP_")}
        # Python workers run this interpreter, as the app's do (pyarrow, the app's code).
        env.update(SPARK_LOCAL_IP="127.0.0.1", PYTHONUNBUFFERED="1", PYSPARK_PYTHON=sys.executable)
        if "SPARK_CONF_DIR" not in env and (CONF_DIR / "spark-defaults.conf").is_file():
            env["SPARK_CONF_DIR"] = str(CONF_DIR)  # as the app does: the same quiet log4j2
        with open(log, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()),
                 *(["--input-dir", str(input_dir)] if input_dir else []),
                 "--checkpoint-dir", str(checkpoint), "--progress-file", str(progress), *extra],
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True,
            )  # fmt: skip
        return cls(proc, progress, log, time.time())

    def events(self) -> list[dict[str, Any]]:
        """The lines the subprocess wrote so far (a cut last line is skipped)."""
        if not self.progress.exists():
            return []
        found = []
        for line in self.progress.read_text().splitlines():
            with contextlib.suppress(ValueError):
                found.append(json.loads(line))
        return found

    def wait_for(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float
    ) -> list[dict[str, Any]]:
        """Poll the progress until done(events) holds; raise with the log tail if not."""
        found: list[dict[str, Any]] = poll_until(
            self.events, done, self.proc, self.log, timeout, "structured run"
        )
        return found

    def stop(self) -> None:
        """SIGTERM (stops the query and Spark), then SIGKILL of the session if it hangs."""
        stop_group(self.proc, grace=60, leader_only=True)

    def kill9(self) -> None:
        """SIGKILL the driver and its JVM."""
        kill_group(self.proc)

    def first_batch_s(self, timeout: float = 180) -> float:
        """Seconds from the spawn to the first micro-batch completed after it."""
        events = self.wait_for(
            lambda found: any(e.get("at", 0) > self.started for e in found), timeout
        )
        return float(min(e["at"] for e in events if e.get("at", 0) > self.started)) - self.started


def append_line(path: str, record: dict[str, Any]) -> None:
    """One JSON line in one O_APPEND write: lines of two threads never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def structured(
    input_dir: str | None,
    checkpoint_dir: str,
    progress_file: str,
    kafka: str | None = None,
    engine_settings: bool = False,
    app_tokenizer: bool = False,
    app_output: bool = False,
    app_postgres: str | None = None,
) -> None:
    """The Structured Streaming word count: one JSON line per progress, until SIGTERM.

    kafka: `bootstrap,topic,cap`: read the topic with the structured engine's own Kafka
    data source (at most `cap` records a partition per micro-batch; 0: no cap) instead of
    input_dir. engine_settings: the structured engine's Spark settings (its state store,
    its worker daemon) instead of Spark's defaults, and its JVM launch (the class
    archive). app_tokenizer: the words of the DStream jobs' tokenizer, which the
    structured engine runs too (`count_words` per partition in `mapInArrow`, then
    `groupBy(word).agg(sum(n))`), instead of Spark's `split`. app_output (with
    app_tokenizer): the app's output to the `output` directory beside the checkpoint,
    through foreachBatch (`output_batch`), instead of the `noop` sink. app_postgres (with
    app_tokenizer): `dsn,table`: the changed totals into that table instead
    (`postgres_batch`)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col, explode, lower, split
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Progress(StreamingQueryListener):
        """Appends each batch's input rows and triggerExecution ms to the progress file."""

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark API)
            """Nothing to record."""

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            """A batch finished."""
            p = event.progress
            append_line(progress_file, {
                "batch": p.batchId, "rows": p.numInputRows,
                "trigger_ms": p.durationMs.get("triggerExecution"), "timestamp": p.timestamp,
                "durations_ms": dict(p.durationMs), "at": time.time(),
            })  # fmt: skip

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            """Nothing to record."""

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            """Nothing to record."""

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    builder = SparkSession.builder.master("local[2]").appName("peer-structured")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        **LOOPBACK_CONF,
        **(engine_conf() if engine_settings else {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    if engine_settings:  # and its JVM's launch: from the class archive, as the app's
        from streaming_app.common.spark_env import launching_jvm

        with launching_jvm():
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    try:
        spark.streams.addListener(Progress())
        if kafka:
            lines = kafka_lines(spark, *kafka.split(","))
        else:
            assert input_dir is not None
            lines = spark.readStream.text(input_dir)
        if app_tokenizer:
            counts = app_counts(lines)
        else:
            words = lines.select(
                explode(split(lower(col("value")), r"[^\p{L}\p{N}]+")).alias("word")
            ).where(col("word") != "")
            counts = words.groupBy("word").count()
        writer = counts.writeStream.outputMode("update")
        if app_output:
            output = str(Path(checkpoint_dir).parent / "output")
            writer = writer.foreachBatch(output_batch(output, checkpoint_dir))
        elif app_postgres:
            dsn, table = app_postgres.rsplit(",", 1)
            create_table(dsn, table)
            writer = writer.foreachBatch(postgres_batch(dsn, table))
        else:
            writer = writer.format("noop")
        query = (
            writer.trigger(processingTime=f"{BATCH_S} seconds")
            .option("checkpointLocation", checkpoint_dir)
            .start()
        )
        append_line(progress_file, {"event": "started"})
        while not stop.wait(0.5):
            if not query.isActive:
                raise SystemExit(f"the query stopped: {query.exception()}")
        query.stop()
    finally:
        spark.stop()


def output_batch(output: str, checkpoint_dir: str) -> Callable[[Any, int], None]:
    """foreachBatch as Spark's docs write one with more than one output: the micro-batch
    persisted, each output written by Spark's text writer, unpersisted. Each micro-batch
    its changed totals (`key<TAB>total`); every `EVERY_TOTAL_BATCHES`, every total as well
    (the state of the micro-batch before, read with Spark's state data source, the changed
    totals laid over it), written twice, as the files base and the snapshot are."""
    from pyspark.sql.functions import col, concat_ws

    def lines(frame: Any) -> Any:
        return frame.select(concat_ws("\t", col("key"), col("total").cast("string")))

    def write(batch: Any, batch_id: int) -> None:
        batch.persist()
        lines(batch).write.mode("overwrite").text(f"{output}/delta-{batch_id}")
        if batch_id > 0 and batch_id % EVERY_TOTAL_BATCHES == 0:
            spark = batch.sparkSession
            state = spark.read.format("statestore").option("batchId", batch_id - 1)
            before = state.load(checkpoint_dir)
            before = before.select(col("key.key").alias("key"), col("value.sum").alias("total"))
            every = before.join(batch.select("key"), "key", "left_anti").unionByName(batch)
            every = every.coalesce(SHUFFLE_PARTITIONS).persist()
            for kind in ("base", "snapshot"):
                lines(every).write.mode("overwrite").text(f"{output}/{kind}-{batch_id}")
            every.unpersist()
        batch.unpersist()

    return write


def create_table(dsn: str, table: str) -> None:
    """The table the postgres sink writes its totals to (word, count), if not there."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (word text PRIMARY KEY, count bigint NOT NULL)"
            ).format(sql.Identifier(table))
        )


def postgres_batch(dsn: str, table: str) -> Callable[[Any, int], None]:
    """foreachBatch writing to PostgreSQL with Spark's guides' pattern for an external
    system (a connection per partition, `foreachPartition`; no JDBC driver needed): each
    partition's changed totals copied into a temporary table and upserted (`INSERT ... ON
    CONFLICT DO UPDATE`) in one transaction of its own, on the executors. A replayed
    micro-batch writes the same absolute totals again; a reader may see one partition's
    part of a micro-batch before the other's (the app's sink commits a batch at once)."""

    def write_partition(rows: Any) -> None:
        import psycopg
        from psycopg import sql

        pairs = [(row["key"], row["total"]) for row in rows]
        if not pairs:
            return
        with psycopg.connect(dsn) as conn:  # one transaction, committed on leaving
            conn.execute("CREATE TEMP TABLE batch (word text, count bigint) ON COMMIT DROP")
            with conn.cursor().copy("COPY batch (word, count) FROM STDIN") as copy:
                for pair in pairs:
                    copy.write_row(pair)
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} AS t (word, count) SELECT word, count FROM batch"
                    " ON CONFLICT (word) DO UPDATE SET count = EXCLUDED.count"
                ).format(sql.Identifier(table))
            )

    def write(batch: Any, batch_id: int) -> None:
        batch.foreachPartition(write_partition)

    return write


def engine_conf() -> dict[str, str]:
    """The structured engine's own Spark settings on local[2] (structured/session.py)."""
    from streaming_app.settings.schema import AppConfig
    from streaming_app.structured.session import session_conf

    return session_conf(AppConfig())


def app_counts(lines: Any) -> Any:
    """The running counts of the lines' words as the structured engine takes them: the
    DStream jobs' `count_words` per partition (structured/pairs.py), summed by Spark."""
    from streaming_app.settings.schema import AppConfig
    from streaming_app.structured.pairs import pairs_of
    from streaming_app.structured.totals import running_totals

    return running_totals(pairs_of(lines, AppConfig()))


def kafka_lines(spark: Any, bootstrap: str, topic: str, cap: str) -> Any:
    """The lines of `topic` through the structured engine's Kafka data source, read from
    the earliest offsets, at most `cap` records a partition per micro-batch."""
    from dataclasses import replace

    from streaming_app.settings.schema import AppConfig
    from streaming_app.structured.kafka_options import KafkaReadSettings
    from streaming_app.structured.kafka_source import NAME, KafkaDataSource

    config = replace(AppConfig(), source="kafka", topics=(topic,), bootstrap_servers=bootstrap)
    settings = replace(KafkaReadSettings.from_config(config), max_per_partition=int(cap))
    spark.dataSource.register(KafkaDataSource)
    return spark.readStream.format(NAME).options(**settings.to_options()).load().select("value")


def main() -> None:
    """Run the word count until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input-dir", help="read the files moved into this directory")
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--progress-file", required=True, help="one JSON line per progress")
    parser.add_argument("--kafka", help="BOOTSTRAP,TOPIC,CAP: read the topic instead")
    parser.add_argument(
        ENGINE_SETTINGS,
        action="store_true",
        help="the structured engine's Spark settings and JVM launch",
    )
    parser.add_argument(
        APP_TOKENIZER,
        action="store_true",
        help="count the DStream jobs' words (mapInArrow) instead of split's",
    )
    parser.add_argument(
        APP_OUTPUT,
        action="store_true",
        help=f"with {APP_TOKENIZER}: write the app's output (foreachBatch) instead of noop",
    )
    parser.add_argument(
        APP_POSTGRES,
        metavar="DSN,TABLE",
        help=f"with {APP_TOKENIZER}: upsert the changed totals into TABLE instead of noop",
    )
    options = parser.parse_args()
    if not (options.input_dir or options.kafka):
        parser.error("--input-dir or --kafka")
    structured(
        options.input_dir, options.checkpoint_dir, options.progress_file,
        options.kafka, options.engine_settings, options.app_tokenizer, options.app_output,
        options.app_postgres,
    )  # fmt: skip


if __name__ == "__main__":
    main()
