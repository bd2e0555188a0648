"""Snapshots of the structured engine and the move between engines, on a real broker and
real Spark: a structured query's snapshots hold exactly the records below their offsets; a
DStream snapshot restored into a new structured query (and a structured one into a new
DStream checkpoint) while records keep coming, totals exact at the end."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streaming_app.common.fs import LocalFs
from streaming_app.recovery.snapshots import latest_snapshot, parse_line, snapshot_times
from tests.integration.batch_waits import wait_batch_of, wait_more_batches
from tests.integration.conftest import kafka_args
from tests.integration.harness import cli_totals, truth, wait_for, wait_for_totals
from tests.integration.kafka_helpers import fresh_topic, read_by_offset, send
from tests.integration.log_lines import WRITTEN
from tests.integration.test_structured_kafka import Producer, lines_of, structured_kafka_args

pytestmark = pytest.mark.timeout(420)

SNAPSHOT = r"wrote state snapshot batch_\w+=(\d+)"


def wait_for_snapshots(app: Any, count: int, timeout: float = 120) -> None:
    """Wait until the app has logged `count` snapshots."""

    def written() -> bool:
        return len(re.findall(SNAPSHOT, app.log())) >= count

    wait_for(f"{count} snapshots written", written, timeout, app, 0.5)


def files_until_two_snapshots(
    dirs: dict[str, Path], start_app: Any, rng: random.Random
) -> tuple[dict[str, str], Callable[[str], None]]:
    """A structured files query fed files until it wrote two snapshots, then stopped.

    Returns the texts dropped (name -> text) and the function that drops another."""
    from tests.integration.harness import drop_file, make_text
    from tests.integration.test_structured_engine import structured_args

    texts: dict[str, str] = {}

    def drop(name: str) -> None:
        texts[name] = make_text(rng, 20)
        drop_file(dirs["input"], name, texts[name].encode())

    first = start_app(*structured_args(dirs, "--snapshot-interval", "2"))
    first.wait_for_log(r"Started new query")
    for _ in range(60):  # a micro-batch a file, each done: snapshots between files
        if len(re.findall(SNAPSHOT, first.log())) >= 2:  # micro-batch N writes N-1's
            break
        wait_batch_of(first, dirs["checkpoint"], lambda: drop(f"a{len(texts)}.txt"))
    else:
        raise AssertionError("no two snapshots in 60 micro-batches:\n" + first.log()[-3000:])
    wait_for_totals(dirs["output"], truth(list(texts.values())), first)
    assert first.terminate() == 0
    return texts, drop


def snapshot_content(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """A snapshot's manifest and its totals."""
    manifest = json.loads((path / "manifest.json").read_text())
    totals: dict[str, int] = {}
    for part in path.glob("part-*"):
        totals.update(parse_line(line) for line in part.read_text().splitlines() if line)
    return manifest, totals


def truth_below(values: dict[tuple[int, int], bytes | None], position: list) -> dict[str, int]:
    """The counts of the records below a snapshot's Kafka position."""
    ends = {int(p): int(o) for _, p, o in position}
    return truth(
        [v.decode() for (p, o), v in values.items() if v is not None and o < ends.get(p, 0)]
    )


# `slow` since 2026-11-30, in the rotating shares (to keep CI within its time). In the
# `not slow` suite: the move between the engines through a snapshot,
# test_engine_move.py.
@pytest.mark.slow
def test_structured_snapshots_are_exact_and_restore_into_dstreams(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(31)
    topic = fresh_topic("ssnap")
    sent = lines_of(rng, 300)
    send(kafka_bootstrap, topic, sent, partitions=3)
    args = structured_kafka_args(
        dirs, kafka_bootstrap, topic, "--snapshot-interval", "4", "--snapshot-keep", "2"
    )
    first = start_app(*args)
    producer = Producer(kafka_bootstrap, topic, random.Random(7), pause=0.7)
    producer.start()
    try:
        wait_for_snapshots(first, 3)
        first.kill9()
        snapshots = dirs["checkpoint"] / "snapshots"
        times = snapshot_times(LocalFs(), str(snapshots))
        assert len(times) == 2  # snapshot_keep
        values = read_by_offset(kafka_bootstrap, topic)
        for batch_ms in times:
            manifest, totals = snapshot_content(snapshots / f"snapshot-{batch_ms}")
            assert manifest["engine"] == "structured" and manifest["source"] == "kafka"
            assert manifest["batch_time_ms"] == batch_ms
            assert sorted(p for _, p, _ in manifest["position"]["kafka"]) == [0, 1, 2]
            expected = truth_below(values, manifest["position"]["kafka"])
            assert totals == expected and expected
            assert manifest["words"] == len(totals)
            assert manifest["total"] == sum(totals.values())
            assert len(list((snapshots / f"snapshot-{batch_ms}").glob("part-*"))) == 2

        # The other way: the newest structured snapshot into a new DStream checkpoint.
        new = tmp_path / "checkpoint-dstream"
        output = tmp_path / "output-dstream"
        restored = start_app(
            *kafka_args(dirs, kafka_bootstrap, topic),
            "--checkpoint-dir", str(new), "--output-dir", str(output),
            "--restore-from-snapshot", str(dirs["checkpoint"]),
        )  # fmt: skip
        match = restored.wait_for_log(r"Seeding the new context from snapshot (\S+):")
        found = latest_snapshot(LocalFs(), str(snapshots))
        assert found is not None and match.group(1) == found[0]
        wait_more_batches(restored)  # batches of the restored run while records arrive
    finally:
        sent += producer.stop()
    wait_for_totals(output, truth(sent), restored, timeout=150)
    assert restored.terminate() == 0
    assert "Traceback" not in restored.log()


# `slow` (155 s): runs only with -m slow; CI moves a DStream snapshot into a query in
# test_engine_move.py::test_a_move_to_the_structured_engine_and_back_is_exact.
@pytest.mark.slow
def test_dstream_snapshot_restored_into_a_structured_query_while_producing(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(37)
    topic = fresh_topic("tostruct")
    # A word only the DStream run reads: the files sink's first base has it from the seed.
    sent = ["dstreamonly words", *lines_of(rng, 200)]
    send(kafka_bootstrap, topic, sent, partitions=3)
    old = dirs["checkpoint"]
    dstream = start_app(*kafka_args(dirs, kafka_bootstrap, topic, "--snapshot-interval", "4"))
    dstream.wait_for_log(r"Started new streaming context")
    producer = Producer(kafka_bootstrap, topic, random.Random(9), pause=0.7)
    producer.start()
    try:
        wait_for_snapshots(dstream, 2)
        dstream.kill9()
        producer.wait_steps()  # records sent while it is down
        new = tmp_path / "checkpoint-structured"
        restore = [
            *structured_kafka_args(dirs, kafka_bootstrap, topic),
            "--checkpoint-dir", str(new), "--restore-from-snapshot", str(old),
        ]  # fmt: skip
        restored = start_app(*restore)
        match = restored.wait_for_log(
            r"Seeding the new query from snapshot (\S+) \(dstream engine\): .*starting_offsets="
        )
        assert match.group(1).startswith(str(old / "snapshots" / "snapshot-"))
        restored.wait_for_log(r"Started new query id=\S+ on checkpoint \S+ seeded from snapshot")
        restored.wait_for_log(r"batch_id=1 batch_time_ms=\d+: \d+ totals changed", timeout=120)
        restored.kill9()  # after micro-batch 0: the restart recovers, the seed is not applied again
        again = start_app(*restore)
        again.wait_for_log(r"Recovered query id=\S+ from checkpoint")
        assert "already seeded from" in again.log()
        again.wait_for_log(WRITTEN)  # a micro-batch after the restart, records arriving
        producer.wait_steps()
    finally:
        sent += producer.stop()
    wait_for_totals(dirs["output"], truth(sent), again, timeout=150)
    assert again.terminate() == 0
    assert "Traceback" not in again.log()
    assert cli_totals(dirs["output"].parent, dirs["output"], "totals") == truth(sent)
    record = json.loads((new / "restored-from-snapshot.json").read_text())
    assert record["snapshot"] == match.group(1)


# `slow` since 2026-11-30, in the rotating shares (to keep CI within its time). In the
# `not slow` suite: the move between the engines through a snapshot,
# test_engine_move.py.
@pytest.mark.slow
def test_files_snapshot_restores_into_a_new_structured_query_and_back_into_dstreams(
    dirs: dict[str, Path], start_app: Any, tmp_path: Path
) -> None:
    from tests.integration.conftest import files_args
    from tests.integration.test_structured_engine import structured_args

    texts, drop = files_until_two_snapshots(dirs, start_app, random.Random(41))
    found = latest_snapshot(LocalFs(), str(dirs["checkpoint"] / "snapshots"))
    assert found is not None
    manifest, totals = snapshot_content(Path(found[0]))
    assert manifest["engine"] == "structured" and manifest["source"] == "files"
    counted = manifest["position"]["files"]
    assert counted and set(counted) <= set(texts)
    assert totals == truth([texts[name] for name in counted])

    def restore(args: list[str], stage: int) -> list[str]:
        """`args` restored from the snapshot into a checkpoint and output of their own."""
        return [
            *args,
            "--checkpoint-dir", str(tmp_path / f"checkpoint-{stage}"),
            "--output-dir", str(tmp_path / f"output-{stage}"),
            "--restore-from-snapshot", found[0],
        ]  # fmt: skip

    drop("late.txt")  # after the snapshot, while stopped: the restored query counts it
    restored = start_app(*restore(structured_args(dirs), 2))
    line = restored.wait_for_log(r"(\d+) input file\(s\) it includes are counted again")
    assert int(line.group(1)) == len(counted)
    drop("after.txt")
    wait_for_totals(tmp_path / "output-2", truth(list(texts.values())), restored)
    assert restored.terminate() == 0
    assert "Traceback" not in restored.log()

    # Back to DStreams from the same snapshot: the files it does not include (late.txt,
    # after.txt, any the first query read after it) go into the seed, new files are read.
    dstream = start_app(*restore(files_args(dirs), 3))
    line = dstream.wait_for_log(r"Seeding the new context from snapshot (\S+): .*plus (\d+) input")
    assert line.group(1) == found[0] and int(line.group(2)) == len(texts) - len(counted)
    dstream.wait_for_log(r"Started new streaming context")
    drop("dstream.txt")
    wait_for_totals(tmp_path / "output-3", truth(list(texts.values())), dstream)
    assert dstream.terminate() == 0
    assert "Traceback" not in dstream.log()


PROGRESS = re.compile(r"micro-batch progress \(Spark's\): (\{.*\})$", re.MULTILINE)
CHANGED = r"batch_id=(\d+) batch_time_ms=\d+: (\d+) totals changed"


def test_a_snapshot_does_not_run_its_micro_batch_again(
    dirs: dict[str, Path], start_app: Any
) -> None:
    """A micro-batch that reads every total (a snapshot, after micro-batch 0) reads its
    cached changes, and Spark's state operator updates each changed key once: the
    progress Spark reports (logged at debug level) counts as many updated rows as the
    micro-batch changed totals. (Read twice in one plan, the micro-batch ran its state
    operator a second time, and the count doubled.)"""
    from tests.integration.harness import drop_file, make_text
    from tests.integration.test_structured_engine import structured_args

    rng = random.Random(47)
    texts = []
    app = start_app(*structured_args(dirs, "--snapshot-interval", "1", "--log-level", "debug"))
    app.wait_for_log(r"Started new query")
    for number in range(3):  # a micro-batch each, a snapshot each (1 s apart at least)
        texts.append(make_text(rng, 20))
        drop_file(dirs["input"], f"f{number}.txt", texts[-1].encode())
        wait_for_snapshots(app, number + 1)
    wait_for_totals(dirs["output"], truth(texts), app)
    assert app.terminate() == 0
    log = app.log()
    changed = {int(b): int(n) for b, n in re.findall(CHANGED, log)}
    updated = {
        progress["batchId"]: progress["stateOperators"][0]["numRowsUpdated"]
        for progress in map(json.loads, PROGRESS.findall(log))
        if progress["numInputRows"]
    }
    read = {int(b) for b in re.findall(SNAPSHOT, log)} - {0}  # 0 reads no state
    assert len(read) >= 2, log[-3000:]
    assert {b: updated.get(b) for b in read} == {b: changed.get(b) for b in read}, log[-3000:]


def test_a_restored_query_puts_the_seed_into_a_new_postgres_table(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    from tests.integration.harness import drop_file, make_text
    from tests.integration.test_structured_engine import structured_args
    from tests.integration.test_structured_postgres import structured_pg_args, wait_for_pg_totals

    rng = random.Random(43)
    texts: list[str] = []

    def drop(name: str) -> None:
        texts.append(make_text(rng, 20))
        drop_file(dirs["input"], name, texts[-1].encode())

    first = start_app(*structured_args(dirs, "--snapshot-interval", "1"))
    first.wait_for_log(r"Started new query")
    texts.append("seedonly words seedonly")  # in no other file: in micro-batch 0's snapshot
    drop_file(dirs["input"], "first.txt", texts[-1].encode())
    for _ in range(60):  # a micro-batch a file, each done: snapshots between files
        if re.search(SNAPSHOT, first.log()):  # micro-batch N writes N-1's
            break
        wait_batch_of(first, dirs["checkpoint"], lambda: drop(f"a{len(texts)}.txt"))
    else:
        raise AssertionError("no snapshot in 60 micro-batches:\n" + first.log()[-3000:])
    assert first.terminate() == 0
    # The files the snapshot holds leave input_dir: the restored query never reads them,
    # so their words reach the table only through the seed.
    found = latest_snapshot(LocalFs(), str(dirs["checkpoint"] / "snapshots"))
    assert found is not None and "first.txt" in found[1].files()
    (tmp_path / "archive").mkdir()
    for name in found[1].files():
        (dirs["input"] / name).rename(tmp_path / "archive" / name)

    # Micro-batch 0 of the restored query replaces the table: the seed and its changes.
    table = f"{pg_schema}.word_totals"
    restored = start_app(
        *structured_pg_args(dirs, pg_dsn, table),
        "--checkpoint-dir", str(tmp_path / "checkpoint-pg"),
        "--restore-from-snapshot", str(dirs["checkpoint"]),
    )  # fmt: skip
    restored.wait_for_log(r"Seeding the new query from snapshot")
    drop("after.txt")
    wait_for_pg_totals(pg_dsn, table, truth(texts), restored, timeout=150)
    assert restored.terminate() == 0
    assert "Traceback" not in restored.log()


def test_an_incompatible_checkpoint_is_restored_from_its_snapshot_under_the_policy(
    dirs: dict[str, Path], start_app: Any
) -> None:
    """An upgrade that cannot read the checkpoint (here: a record from before the state
    layout was recorded, as 3660695 wrote it), with the same command line plus
    `--on-incompatible-checkpoint restore-from-snapshot`: the checkpoint moves aside, a new
    query starts from its newest snapshot, and the totals stay exact as files keep coming."""
    from streaming_app.recovery.metadata import STRUCTURED_METADATA_FILE
    from tests.integration.test_structured_engine import structured_args

    texts, drop = files_until_two_snapshots(dirs, start_app, random.Random(43))
    ckpt = dirs["checkpoint"]
    record_path = ckpt / STRUCTURED_METADATA_FILE
    record = json.loads(record_path.read_text())
    del record["settings"]["state_layout"]
    record_path.write_text(json.dumps(record))
    # Hadoop's checksum of the old text, if Hadoop wrote it (a local one is written by Python).
    (ckpt / f".{STRUCTURED_METADATA_FILE}.crc").unlink(missing_ok=True)

    drop("while-stopped.txt")
    refused = start_app(*structured_args(dirs))
    assert refused.wait(timeout=120) == 3
    assert "state layout value-per-key -> " in refused.log()

    upgraded = start_app(
        *structured_args(dirs, "--on-incompatible-checkpoint", "restore-from-snapshot")
    )
    upgraded.wait_for_log(r"Started new query id=\S+ on checkpoint \S+ seeded from snapshot")
    assert [p for p in ckpt.parent.iterdir() if p.name.startswith(ckpt.name + ".incompatible-")]
    drop("after.txt")
    wait_for_totals(dirs["output"], truth(list(texts.values())), upgraded)
    assert upgraded.terminate() == 0
    assert "Traceback" not in upgraded.log()
