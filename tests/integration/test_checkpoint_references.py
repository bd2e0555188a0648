"""The `module.qualname` references a new checkpoint pickles, against a checked-in list.

Spark's checkpoint holds every Python function of the DStream graph, pickled by
cloudpickle: module-level functions and classes by reference (module and qualname, which
must still import when a checkpoint is loaded), lambdas and closures by value (their
module and qualname, and the module functions they reference, by reference again). A
seeded context's checkpoint also holds its initial RDD, with the functions of its lineage.
Moving or renaming one referred to by reference makes the checkpoints of the version
before unloadable, so such a change needs a new version (whose guard then refuses the old
checkpoints and points to the snapshot hand-over); one pickled by value carries its code
and loads without its module, so moving it only asks for the list to be regenerated.

The graphs are built in this process on local Spark by `create_context`, never started:
Spark's own checkpoint serializer is run on each graph (what a checkpoint file holds), and
every pickle it asks Python for, and every RDD command pickled while the graph is built,
is read with pickletools. The list, headed by the version it was made for, is
checkpoint_references.txt next to this file. Regenerate it (after bumping the version):

    UPDATE_CHECKPOINT_REFERENCES=1 scripts/test.sh tests/integration/test_checkpoint_references.py
"""

from __future__ import annotations

import json
import os
import pickle
import pickletools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import streaming_app
from streaming_app.common.fs import LocalFs
from streaming_app.recovery.restore import Seed
from streaming_app.recovery.snapshots import Manifest, read_manifest
from streaming_app.settings.loading import load_config

pytestmark = pytest.mark.timeout(300)

LIST_FILE = Path(__file__).with_name("checkpoint_references.txt")
UPDATE_VARIABLE = "UPDATE_CHECKPOINT_REFERENCES"
REGENERATE = f"{UPDATE_VARIABLE}=1 scripts/test.sh tests/integration/test_checkpoint_references.py"
HEADER = "# streaming_app {version}: module.qualname references pickled into a new checkpoint"
PREFIX = "streaming_app."
BY_VALUE = " (by value)"
MODULE = " (module)"

STRING_OPS = {
    "UNICODE",
    "SHORT_BINUNICODE",
    "BINUNICODE",
    "BINUNICODE8",
    "STRING",
    "BINSTRING",
    "SHORT_BINSTRING",
}
PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
GET_OPS = {"GET", "BINGET", "LONG_BINGET"}


def pickled_references(data: bytes) -> set[str]:
    """Every reference under streaming_app in one pickle.

    Globals (GLOBAL, STACK_GLOBAL) as `module.qualname`; functions cloudpickle stores by
    value as `module.qualname (by value)` (from their state's `__module__` and
    `__qualname__`); modules it imports on load (`subimport`) as `module (module)`.
    """
    memo: dict[int, object] = {}
    pushed: list[object] = []  # the string each op left on the stack, or None
    qualnames: list[str] = []  # by-value functions' qualnames, waiting for their module
    found: set[str] = set()
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("PROTO", "FRAME"):  # not on the stack; a frame may end anywhere
            continue
        if op.name == "MEMOIZE":
            memo[len(memo)] = pushed[-1]
            continue
        if op.name in PUT_OPS:
            memo[int(arg)] = pushed[-1]
            continue
        value: object = None
        if op.name in GET_OPS:
            value = memo[int(arg)]
        elif op.name in STRING_OPS:
            value = arg.decode("latin-1") if isinstance(arg, bytes) else arg
        elif op.name == "STACK_GLOBAL":
            module, qualname = pushed[-2], pushed[-1]
            assert isinstance(module, str) and isinstance(qualname, str), (module, qualname)
            found.add(f"{module}.{qualname}")
            value = ("global", module, qualname)
        elif op.name == "GLOBAL":
            module, qualname = str(arg).split(" ", 1)
            found.add(f"{module}.{qualname}")
            value = ("global", module, qualname)
        if isinstance(value, str) and pushed:
            before = pushed[-1]
            if before == "__qualname__":
                qualnames.append(value)
            elif before == "__module__" and qualnames:
                found.add(f"{value}.{qualnames.pop()}{BY_VALUE}")
            elif isinstance(before, tuple) and before[2] == "subimport":
                found.add(f"{value}{MODULE}")
        pushed.append(value)
    return {name for name in found if name.startswith(PREFIX)}


class Recorder:
    """The pickles Spark takes of a graph: its checkpoint's functions and RDD commands."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import pyspark.core.rdd
        from pyspark.streaming.util import TransformFunctionSerializer

        self.pickles: list[bytes] = []
        dumps = TransformFunctionSerializer.dumps
        prepare = pyspark.core.rdd._prepare_for_python_RDD

        def recording_dumps(serializer: Any, ident: Any) -> Any:
            data = dumps(serializer, ident)
            assert data is not None, serializer.getLastFailure()
            self.pickles.append(bytes(data))
            return data

        def recording_prepare(sc: Any, command: Any) -> Any:
            prepared = prepare(sc, command)
            self.pickles.append(bytes(prepared[0]))
            return prepared

        monkeypatch.setattr(TransformFunctionSerializer, "dumps", recording_dumps)
        monkeypatch.setattr(pyspark.core.rdd, "_prepare_for_python_RDD", recording_prepare)

    def references(self) -> set[str]:
        """Every reference in the pickles recorded so far."""
        return {name for data in self.pickles for name in pickled_references(data)}


@pytest.fixture(scope="module")
def sc() -> Iterator[Any]:
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setMaster("local[2]").setAppName("test-checkpoint-references")
    conf.set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
    context = SparkContext.getOrCreate(conf)
    context.setLogLevel("ERROR")
    yield context
    context.stop()


def checkpoint_of(sc: Any, ssc: Any) -> int:
    """Serialize the graph as Spark writes a checkpoint of it; the checkpoint's size."""
    jvm = sc._jvm
    streaming = jvm.org.apache.spark.streaming
    checkpoint = streaming.Checkpoint(ssc._jssc.ssc(), streaming.Time(0))
    return len(streaming.Checkpoint.serialize(checkpoint, sc._jsc.sc().conf()))


def write_seed(tmp_path: Path, input_dir: Path) -> Seed:
    """A small files-source snapshot; a file in `input_dir` that it does not include."""
    snapshot = tmp_path / "snapshots" / "snapshot-1000"
    snapshot.mkdir(parents=True)
    (snapshot / "part-00000").write_text('["a", 2]\n["b", 1]\n')
    manifest = Manifest(1000, "files", 1000, streaming_app.__version__, 2, 3, {"files": []})
    (snapshot / "manifest.json").write_text(json.dumps(manifest.to_json()))
    (input_dir / "later.txt").write_text("a c\n")
    return Seed(str(snapshot), read_manifest(LocalFs(), str(snapshot)))


# Nothing listens on port 1: building a graph must not need a broker or a database.
SOCKET = {"source": "socket", "host": "127.0.0.1", "port": "1"}
FILES = {"source": "files", "input_dir": "{dir}/input"}
KAFKA = {"source": "kafka", "bootstrap_servers": "127.0.0.1:1", "topics": "t"}
POSTGRES = {"sinks": "postgres", "postgres_dsn": "host=127.0.0.1 port=1 dbname=none"}
KEYED = {"job": "keyed-sum", "csv_fields": "k,v", "key_field": "k", "value_field": "v"}
LOCAL_SINKS = {"sinks": "files,console", "output_dir": "{dir}/output"}

# Every source, job, sink, state layout, window and snapshots, and a seeded context.
GRAPHS: dict[str, dict[str, str]] = {
    "files-wordcount": {**FILES, **LOCAL_SINKS},
    "files-seeded": {**FILES, **LOCAL_SINKS},
    "files-per-key-window": {**FILES, **LOCAL_SINKS, "state_buckets": "0", "window": "2"},
    "kafka-postgres-window": {**KAFKA, **POSTGRES, "group_id": "g", "window": "4"},
    "kafka-keyed-postgres": {**KAFKA, **KEYED, **POSTGRES, "snapshot_keep": "0"},
    "socket-keyed-window": {
        **SOCKET, **KEYED, **LOCAL_SINKS, "window": "4", "slide": "2", "state_buckets": "0"
    },
}  # fmt: skip
SEEDED = {"files-seeded"}


def collect(sc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The references of every graph's checkpoint."""
    from streaming_app.dstream.factory import create_context

    found: set[str] = set()
    for name, graph in GRAPHS.items():
        base = tmp_path / name
        (base / "input").mkdir(parents=True)
        settings = {
            **{key: value.replace("{dir}", str(base)) for key, value in graph.items()},
            "checkpoint_dir": str(base / "checkpoint"),
            "batch_interval": "1",
            "checkpoint_interval": "2",
        }
        config = load_config(env={}, cli=settings)
        with monkeypatch.context() as patch:
            recorder = Recorder(patch)
            seed = write_seed(base, base / "input") if name in SEEDED else None
            ssc = create_context(config, seed)
            try:
                assert checkpoint_of(sc, ssc) > 0
            finally:
                ssc.stop(stopSparkContext=False)
        references = recorder.references()
        assert references, f"graph {name}: no reference found"
        found |= references
    return found


def read_list(path: Path) -> tuple[str | None, set[str]]:
    """The version the list was made for, and its references."""
    if not path.exists():
        return None, set()
    lines = path.read_text("utf-8").splitlines()
    prefix, suffix = HEADER.split("{version}")
    version = None
    if lines and lines[0].startswith(prefix) and lines[0].endswith(suffix):
        version = lines[0][len(prefix) : len(lines[0]) - len(suffix)]
    return version, {line for line in lines if line and not line.startswith("#")}


def write_list(path: Path, references: set[str]) -> None:
    """The list file for this version."""
    lines = [
        HEADER.format(version=streaming_app.__version__),
        f"# Made by tests/integration/{Path(__file__).name}; regenerate: {REGENERATE}",
        *sorted(references),
    ]
    path.write_text("\n".join(lines) + "\n", "utf-8")


def compare(recorded_version: str | None, expected: set[str], found: set[str]) -> str | None:
    """Why the list does not fit this version's checkpoints, or None if it does."""
    version = streaming_app.__version__
    if recorded_version != version:
        return (
            f"{LIST_FILE.name} was made for streaming_app {recorded_version}, this is "
            f"{version}: regenerate it with `{REGENERATE}`"
        )
    if found != expected:
        lines = [f"- {name}" for name in sorted(expected - found)]
        lines += [f"+ {name}" for name in sorted(found - expected)]
        if all(name.endswith(BY_VALUE) for name in found ^ expected):
            # A function pickled by value carries its code: loading it imports nothing of
            # its module (what it refers to is listed by reference, unchanged here).
            return (
                "only functions pickled by value moved, so a checkpoint of this version still "
                f"loads: regenerate the list with `{REGENERATE}`\n" + "\n".join(lines)
            )
        return (
            f"the references a checkpoint pickles changed, and the version is still {version}: "
            "a checkpoint of this version would not load: bump the version, then regenerate "
            f"with `{REGENERATE}`\n" + "\n".join(lines)
        )
    return None


def test_references_a_checkpoint_pickles_match_the_list_of_this_version(
    sc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = collect(sc, tmp_path, monkeypatch)
    if os.environ.get(UPDATE_VARIABLE):
        write_list(LIST_FILE, found)
    problem = compare(*read_list(LIST_FILE), found)
    assert problem is None, problem


def test_the_comparison_fails_on_a_changed_reference_or_a_stale_list(tmp_path: Path) -> None:
    version = streaming_app.__version__
    refs = {"streaming_app.jobs.text.count_words", "streaming_app.x.f.<locals>.g (by value)"}
    path = tmp_path / "list.txt"
    write_list(path, refs)
    assert read_list(path) == (version, refs)
    assert compare(version, refs, set(refs)) is None
    moved = compare(version, refs, {*refs, "streaming_app.jobs.words.count_words"})
    assert (
        moved is not None and "bump the version" in moved and "+ streaming_app.jobs.words" in moved
    )
    by_value = compare(
        version,
        refs,
        {"streaming_app.jobs.text.count_words", "streaming_app.y.f.<locals>.g (by value)"},
    )
    assert by_value is not None and "regenerate the list" in by_value
    assert "bump the version" not in by_value
    stale = compare("0.0.1", refs, set(refs))
    assert stale is not None and "made for streaming_app 0.0.1" in stale


def test_pickled_references_reads_globals_by_value_functions_and_modules() -> None:
    from pyspark import cloudpickle

    from streaming_app.jobs import text

    def closure(line: str) -> Any:
        return text.count_words([line])

    closure.__module__ = "streaming_app.jobs.fake"
    refs = pickled_references(cloudpickle.dumps((text.count_words, closure, [closure])))
    assert "streaming_app.jobs.text.count_words" in refs
    name = "test_pickled_references_reads_globals_by_value_functions_and_modules"
    assert f"streaming_app.jobs.fake.{name}.<locals>.closure (by value)" in refs
    assert "streaming_app.jobs.text (module)" in refs
    # By value, a function loads without its module (there is no streaming_app.jobs.fake).
    loaded = pickle.loads(cloudpickle.dumps(closure))
    assert list(loaded("a b a")) == list(text.count_words(["a b a"]))
