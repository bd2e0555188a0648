"""Spark's part of a checkpoint directory: its files, its RDD folders, and what Spark reads."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Protocol

from streaming_app.common.checkpoint_files import CHECKPOINT_FILE
from streaming_app.common.fs import FileSystem, LocalFs, join
from streaming_app.common.java import java_binary
from streaming_app.errors import ConfigError, StreamingAppError

log = logging.getLogger(__name__)

_UUID = r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}"
UUID_NAME = re.compile(rf"^{_UUID}$")
RDD_NAME = re.compile(r"^rdd-[0-9]+$")
# How a serialized checkpoint names an RDD checkpoint: `<scheme:/dir>/<uuid>/rdd-<n>`.
# Java serialization keeps strings literal; only the compression hides them.
_RDD_REF = re.compile(rf"/({_UUID})/(rdd-[0-9]+)".encode())
# Spark logs every failed deserialization at ERROR with a stack trace; we report it.
_NOISY_LOGGERS = ("org.apache.spark.util.Utils", "org.apache.spark.util.SparkErrorUtils")


class CheckpointFs(FileSystem, Protocol):
    """What the checkpoint tools need beyond the logs' FileSystem: kinds, sizes, times."""

    def is_dir(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def mtime_ms(self, path: str) -> int: ...


class LocalCheckpointFs(LocalFs):
    """CheckpointFs on local paths."""

    def is_dir(self, path: str) -> bool:
        """Whether the path is a directory."""
        return os.path.isdir(path)

    def size(self, path: str) -> int:
        """Bytes of a file, or of every file under a directory (links not followed)."""
        if not os.path.isdir(path) or os.path.islink(path):
            return os.lstat(path).st_size if os.path.lexists(path) else 0
        total = 0
        for root, _, names in os.walk(path):
            total += sum(os.lstat(os.path.join(root, n)).st_size for n in names)
        return total

    def mtime_ms(self, path: str) -> int:
        """Last modification time in epoch ms."""
        return int(os.lstat(path).st_mtime * 1000)


@dataclass(frozen=True)
class SparkFile:
    """One `checkpoint-<ms>[.bk]` file."""

    name: str
    batch_ms: int
    backup: bool
    size: int
    mtime_ms: int


def spark_files(fs: CheckpointFs, checkpoint_dir: str) -> list[SparkFile]:
    """Spark's checkpoint files in the order Spark tries them: newest first, .bk after."""
    found = []
    for name in fs.list_names(checkpoint_dir):
        match = CHECKPOINT_FILE.match(name)
        path = join(checkpoint_dir, name)
        if match and not fs.is_dir(path):
            size, mtime = fs.size(path), fs.mtime_ms(path)
            found.append(SparkFile(name, int(match[1]), name.endswith(".bk"), size, mtime))
    return sorted(found, key=lambda f: (-f.batch_ms, f.backup))


@dataclass(frozen=True)
class RddDir:
    """One `rdd-<n>` checkpoint of an RDD (the state stream's, for streaming_app)."""

    name: str
    size: int
    mtime_ms: int


@dataclass(frozen=True)
class RddFolder:
    """A `<uuid>` folder of RDD checkpoints: Spark makes one per run (SparkContext)."""

    name: str
    size: int
    mtime_ms: int  # the latest of the folder's and its entries' times
    rdds: tuple[RddDir, ...]


def rdd_folders(fs: CheckpointFs, checkpoint_dir: str) -> list[RddFolder]:
    """The RDD checkpoint folders, by name."""
    folders = []
    for name in sorted(fs.list_names(checkpoint_dir)):
        path = join(checkpoint_dir, name)
        if not UUID_NAME.match(name) or not fs.is_dir(path):
            continue
        rdds = tuple(
            RddDir(rdd, fs.size(join(path, rdd)), fs.mtime_ms(join(path, rdd)))
            for rdd in sorted(fs.list_names(path), key=lambda n: (len(n), n))
            if RDD_NAME.match(rdd)
        )
        mtime = max([fs.mtime_ms(path), *(r.mtime_ms for r in rdds)])
        folders.append(RddFolder(name, fs.size(path), mtime, rdds))
    return folders


def newest_rdd_folder(folders: list[RddFolder]) -> str | None:
    """The folder the latest run writes to: the most recently changed one."""
    return max(folders, key=lambda f: f.mtime_ms).name if folders else None


def rdd_refs_in(data: bytes) -> frozenset[str]:
    """The `<uuid>/rdd-<n>` folders named in a decompressed checkpoint file."""
    return frozenset(f"{m[1].decode()}/{m[2].decode()}" for m in _RDD_REF.finditer(data))


@dataclass(frozen=True)
class FileCheck:
    """What Spark made of one checkpoint file (all None when it was not asked)."""

    readable: bool | None = None
    checkpoint_time_ms: int | None = None  # the batch time inside the file
    rdd_refs: frozenset[str] | None = None  # `<uuid>/rdd-<n>`
    error: str | None = None
    batch_ms: int | None = None  # the graph's batch interval
    state_checkpoint_ms: int | None = None  # the longest DStream checkpoint interval


class CheckpointProbe(Protocol):
    """Asks Spark about checkpoint files, or (NoProbe) does not."""

    @property
    def verifies(self) -> bool: ...

    def check(self, path: str) -> FileCheck: ...


class NoProbe:
    """`--no-verify`: nothing is known about the files' content, and no JVM starts."""

    verifies = False

    def check(self, path: str) -> FileCheck:
        """Unknown."""
        return FileCheck()


def start_gateway() -> Any:
    """The JVM, ready to deserialize PySpark checkpoints; no SparkContext is created.

    A PySpark checkpoint holds pickled Python functions: Spark's deserializer calls back
    into this process to unpickle them, through the serializer that
    StreamingContext._ensure_initialized registers (with py4j's callback server).
    """
    from pyspark import SparkContext
    from pyspark.streaming import StreamingContext

    from streaming_app.common.failure_text import failure_summary
    from streaming_app.common.spark_env import repo_conf_dir

    if SparkContext._gateway is None:
        if java_binary() is None:
            raise ConfigError(
                "Java is not installed (no java on PATH and no JAVA_HOME): reading checkpoint "
                "files needs the JVM Spark runs on; install Java 17 or 21, or pass --no-verify"
            )
        os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--master local[1] pyspark-shell")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf_dir = repo_conf_dir()
        if conf_dir:
            os.environ.setdefault("SPARK_CONF_DIR", conf_dir)
    try:
        StreamingContext._ensure_initialized()
    except Exception as exc:
        raise StreamingAppError(
            f"could not start the JVM to read checkpoint files: {failure_summary(str(exc))} "
            "(pass --no-verify to skip)"
        ) from None
    gateway: Any = SparkContext._gateway
    jvm = gateway.jvm
    try:
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in _NOISY_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:
        log.debug("could not quiet Spark's deserialization errors", exc_info=True)
    return jvm


class SparkProbe:
    """Reads checkpoint files as Spark's recovery does: `Checkpoint.deserialize`."""

    verifies = True

    def __init__(self) -> None:
        jvm = start_gateway()
        self._jvm = jvm
        # Like StreamingContext.getOrCreate: today's Spark configuration picks the codec.
        self._conf = jvm.org.apache.spark.SparkConf(True)
        self._codec = jvm.org.apache.spark.io.CompressionCodec.createCodec(self._conf)
        util = jvm.org.apache.spark.deploy.SparkHadoopUtil.get()
        self._hadoop_conf = util.newConfiguration(self._conf)

    def check(self, path: str) -> FileCheck:
        """Whether Spark can read the file, the batch time inside, and its RDD references."""
        try:
            refs = rdd_refs_in(self._decompressed(path))
        except Exception as exc:
            return FileCheck(readable=False, error=_summary(exc))
        stream = self._open(path)
        try:
            checkpoint = self._jvm.org.apache.spark.streaming.Checkpoint.deserialize(
                stream, self._conf
            )
        except Exception as exc:
            return FileCheck(readable=False, rdd_refs=refs, error=_summary(exc))
        finally:
            stream.close()
        graph = checkpoint.graph()
        return FileCheck(
            readable=True,
            checkpoint_time_ms=int(checkpoint.checkpointTime().milliseconds()),
            rdd_refs=refs,
            batch_ms=int(graph.batchDuration().milliseconds()),
            state_checkpoint_ms=_state_checkpoint_ms(graph),
        )

    def decompress(self, data: bytes) -> bytes:
        """A checkpoint file's bytes as Spark's codec inflates them."""
        jvm = self._jvm
        inflated = self._codec.compressedInputStream(jvm.java.io.ByteArrayInputStream(data))
        try:
            return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(inflated))
        finally:
            inflated.close()

    def compress(self, data: bytes) -> bytes:
        """Bytes compressed as Spark's Checkpoint.serialize does."""
        out = self._jvm.java.io.ByteArrayOutputStream()
        deflating = self._codec.compressedOutputStream(out)
        deflating.write(data)
        deflating.close()
        return bytes(out.toByteArray())

    def _open(self, path: str) -> Any:
        uri = path if "://" in path else "file://" + os.path.abspath(path)
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return hadoop_path.getFileSystem(self._hadoop_conf).open(hadoop_path)

    def _decompressed(self, path: str) -> bytes:
        stream = self._open(path)
        try:
            inflated = self._codec.compressedInputStream(stream)
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(inflated))
        finally:
            stream.close()


def _state_checkpoint_ms(graph: Any) -> int | None:
    """The longest checkpoint interval of the graph's DStreams (the state stream's)."""
    longest = None
    stack, seen = list(graph.getOutputStreams()), set()
    while stack:
        stream = stack.pop()
        if stream.hashCode() in seen:
            continue
        seen.add(stream.hashCode())
        duration = stream.checkpointDuration()
        if duration is not None:
            longest = max(longest or 0, int(duration.milliseconds()))
        deps = stream.dependencies()
        stack.extend(deps.apply(i) for i in range(deps.length()))
    return longest


def _summary(exc: BaseException) -> str:
    """One line: the innermost informative exception of a Java failure and its causes."""
    from streaming_app.common.failure_text import failure_summary

    texts: list[str] = []
    cause = getattr(exc, "java_exception", None)
    while cause is not None and len(texts) < 20:
        texts.append(str(cause.toString()))
        cause = cause.getCause()
    return failure_summary("\n".join(texts) or str(exc))


# Spark takes any name containing "checkpoint-<digits>" for one of its files.
UNUSABLE_PREFIX = "unusable-"


def unusable_name(name: str) -> str:
    """The name a set-aside checkpoint file gets: one that Spark's reader does not list."""
    return UNUSABLE_PREFIX + name.replace("checkpoint-", "ckpt-", 1)
