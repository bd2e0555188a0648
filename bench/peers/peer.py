"""streaming_app against a Structured Streaming word count, both on the directory source.

    python bench/run.py peer [--files N --lines-per-file N --rounds N --workdir DIR]

Both systems are fed the same rounds of files, one system after the other, each started
once; the Structured Streaming side is bench/peers/spark_peer.py, which peer() runs as a
subprocess.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S, LOOPBACK_CONF, AppRun
from bench.harness.corpus import VOCABULARY, WORDS_PER_LINE
from bench.harness.results import make_workdir, median
from bench.peers.spark_peer import SHUFFLE_PARTITIONS, StructuredRun
from streaming_app.common.metrics_record import BatchMetrics
from streaming_app.tools.produce import generated_lines

# Files go in this long after a batch boundary (both systems' batches start on multiples
# of the interval in epoch time), so that one batch reads a whole round.
MOVE_PHASE_S = 0.5


def write_rounds(directory: Path, rounds: int, files: int, lines_per_file: int) -> list[list[Path]]:
    """The files of every round: 10-word Zipf lines, one corpus (seed) per round."""
    plan = []
    for number in range(rounds):
        corpus = generated_lines(WORDS_PER_LINE, VOCABULARY, seed=1000 + number)
        paths = []
        for index in range(files):
            path = directory / f"r{number:03d}-f{index:03d}.txt"
            path.write_text("".join(line + "\n" for line in islice(corpus, lines_per_file)))
            paths.append(path)
        plan.append(paths)
    return plan


def move_in(paths: list[Path], staging: Path, input_dir: Path) -> None:
    """Copy a round to staging, then rename it all into the watched directory, mtime now."""
    staged = []
    for path in paths:
        shutil.copyfile(path, staging / path.name)
        staged.append(staging / path.name)
    time.sleep((MOVE_PHASE_S - time.time() % BATCH_S) % BATCH_S)
    for path in staged:
        os.utime(path)
    for path in staged:
        os.rename(path, input_dir / path.name)


def files_read(checkpoint: Path) -> dict[str, int]:
    """Input file name -> batch time, from the app's input-files log under its checkpoint."""
    found: dict[str, int] = {}
    directory = checkpoint / "input-files"
    if not directory.is_dir():
        return found
    for entry in directory.iterdir():
        if not entry.name.isdigit():
            continue  # temp files and .crc side files
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(entry.read_text())
            if record.get("note") == "read":
                found.update((str(name), int(entry.name)) for name in record.get("files", []))
    return found


def files_app_args(base: Path, name: str, *extra: str) -> list[str]:
    """A files-source run of the app in `base/name` (its input directory `in`): 2 s batches,
    the console sink, a state checkpoint every 20 s; `extra` after (sinks, the engine)."""
    return [
        "--source", "files", "--input-dir", str(base / name / "in"),
        "--checkpoint-dir", str(base / name / "ck"),
        "--batch-interval", str(BATCH_S), "--checkpoint-interval", "20", "--sink", "console",
        "--spark-conf", "spark.ui.enabled=false",
        *[arg for item in LOOPBACK_CONF.items() for arg in ("--spark-conf", "=".join(item))],
        *extra,
    ]  # fmt: skip


def dstream_rounds(
    base: Path, plan: list[list[Path]], lines_per_round: int, *extra: str, name: str = "dstream"
) -> tuple[list[Any], float | None]:
    """streaming_app on the rounds: (processing s, batches) of each, and an empty batch's s.

    extra: more arguments of the app (files_app_args)."""
    input_dir, staging, checkpoint = base / name / "in", base / name / "staging", base / name / "ck"
    input_dir.mkdir(parents=True)
    staging.mkdir()
    app = AppRun.start(base, name, files_app_args(base, name, *extra))
    seen: dict[str, int] = {}
    found = []
    try:
        app.wait_for(lambda batches: bool(batches), timeout=180)  # running: files now count
        for paths in plan:
            names = {path.name for path in paths}
            move_in(paths, staging, input_dir)

            def processed(batches: list[BatchMetrics], names: set[str] = names) -> bool:
                seen.update(files_read(checkpoint))
                if not names <= seen.keys():
                    return False
                done = {b.batch_time_ms for b in batches if b.processing_ms is not None}
                return {seen[name] for name in names} <= done

            batches = app.wait_for(processed, timeout=120 + lines_per_round / 1000)
            times = {seen[name] for name in names}
            ms = sum(b.processing_ms or 0 for b in batches if b.batch_time_ms in times)
            found.append((ms / 1000, len(times)))
        # Batches between rounds read nothing but still update and print the whole state.
        read = set(seen.values())
        empty = [
            b.processing_ms / 1000
            for b in app.batches()
            if b.batch_time_ms > min(read) and b.batch_time_ms not in read and b.processing_ms
        ]
    finally:
        app.stop()
    return found, round(median(empty), 3) if empty else None


def structured_rounds(
    base: Path, plan: list[list[Path]], lines_per_round: int, *extra: str
) -> list[Any]:
    """Structured Streaming on the rounds: (triggerExecution s, batches) of each round.

    extra: more arguments of its run (StructuredRun.start)."""
    input_dir, staging = base / "structured-in", base / "structured-staging"
    input_dir.mkdir()
    staging.mkdir()
    run = StructuredRun.start(base, input_dir, base / "structured-ck", *extra)
    used = 0  # progress lines with input already assigned to a round
    found = []
    try:
        run.wait_for(lambda events: any(e.get("event") == "started" for e in events), 180)
        for paths in plan:
            move_in(paths, staging, input_dir)

            def processed(events: list[dict[str, Any]], used: int = used) -> bool:
                busy = [e for e in events if e.get("rows")][used:]
                return sum(int(e["rows"]) for e in busy) >= lines_per_round

            events = run.wait_for(processed, timeout=120 + lines_per_round / 1000)
            busy = [e for e in events if e.get("rows")]
            mine, used = busy[used:], len(busy)
            found.append((sum(e["trigger_ms"] for e in mine) / 1000, len(mine)))
    finally:
        run.stop()
    return found


def figures(rounds: list[Any], words: int) -> dict[str, Any]:
    """Per-round and median figures, the medians over the rounds after the first."""
    rates = [words / seconds for seconds, _ in rounds]
    steady = rounds[1:] or rounds
    return {
        "processing_s": [round(seconds, 3) for seconds, _ in rounds],
        "batches": [batches for _, batches in rounds],
        "words_per_s": [round(rate) for rate in rates],
        "median_processing_s": round(median([seconds for seconds, _ in steady]), 3),
        # Bases and snapshots fall on some rounds only: the median may hide them, the mean not.
        "mean_processing_s": round(sum(seconds for seconds, _ in steady) / len(steady), 3),
        "median_words_per_s": round(median(rates[1:] or rates)),
    }


def peer(workdir: Path, files: int, lines_per_file: int, rounds: int) -> dict[str, Any]:
    """Words/s of streaming_app and of a Structured Streaming word count on the same rounds."""
    base = Path(tempfile.mkdtemp(prefix="peer-", dir=workdir))
    (base / "rounds").mkdir()
    plan = write_rounds(base / "rounds", rounds, files, lines_per_file)
    lines_per_round = files * lines_per_file
    words = lines_per_round * WORDS_PER_LINE
    rounds_read, empty_s = dstream_rounds(base, plan, lines_per_round)
    dstream = {**figures(rounds_read, words), "median_empty_batch_s": empty_s}
    structured = figures(structured_rounds(base, plan, lines_per_round), words)
    return {
        "lines_per_file": lines_per_file,
        "files_per_round": files,
        "lines_per_round": lines_per_round,
        "lines": lines_per_round * rounds,
        "rounds": rounds,
        "words_per_round": words,
        "shuffle_partitions": SHUFFLE_PARTITIONS,
        "shuffle_partitions_why": "Structured Streaming's spark.sql.shuffle.partitions=2 "
        "matches the 2 cores of local[2]; the default of 200 would be unfair",
        "streaming_app": dstream,
        "structured": structured,
        "ratio": round(dstream["median_words_per_s"] / structured["median_words_per_s"], 2),
        "how": f"{rounds} rounds of {files} files x {lines_per_file:,} lines moved in at once "
        f"{MOVE_PHASE_S} s after a batch boundary, the next round once the round is processed; "
        "the systems one after the other, each started once, `local[2]`, 2 s batches; per "
        "round, words / processing time of the batches that read it (streaming_app: "
        "StreamingListener processing time of the batches its input-files log names for the "
        "round's files, console sink, checkpoint every 20 s, snapshots as by default; "
        "Structured Streaming: triggerExecution of the batches with input rows, "
        "groupBy(word).count() in update mode to the noop sink, state store written every "
        "batch); medians over the rounds after the first (JVM warm-up)",
        "workdir": str(base),
    }


def peer_report(p: dict[str, Any]) -> list[str]:
    """The markdown lines of the comparison, for docs/benchmarks.md."""
    a, s = p["streaming_app"], p["structured"]
    steady = max(p["rounds"] - 1, 1)
    return [
        "**Against Structured Streaming** (directory source, `local[2]`, 2 s batches and "
        f"triggers; {p['rounds']} rounds of {p['files_per_round']} files of "
        f"{p['lines_per_file']:,} lines of 10 words over a Zipf vocabulary of 100k words, "
        "the same files for both, moved in at once; one system after the other):",
        "",
        "| | words/s | processing of a round | how |",
        "|---|---|---|---|",
        f"| streaming_app (DStream, `updateStateByKey`, console sink) | "
        f"{a['median_words_per_s']:,} | {a['median_processing_s']} s | processing time of the "
        "batches that read the round (StreamingListener), state checkpoint every 10 batches; "
        f"a batch between rounds, which reads nothing: {a['median_empty_batch_s']} s |",
        f"| Structured Streaming (`groupBy(word).count()`, update mode, `noop` sink) | "
        f"{s['median_words_per_s']:,} | {s['median_processing_s']} s | `triggerExecution` of "
        "the batches with input rows; `spark.sql.shuffle.partitions=2`, as many as the cores "
        "(the default 200 would be unfair) |",
        f"| **ratio streaming_app / Structured** | **{p['ratio']}** | | medians over "
        f"{steady} round{'s' if steady != 1 else ''} of {p['words_per_round']:,} words after "
        "the first (JVM warm-up) |",
    ]


def main() -> None:
    """Run the comparison and print its markdown."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2, help="files per round")
    parser.add_argument("--lines-per-file", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--workdir", type=Path, help="keep logs and metrics here")
    options = parser.parse_args()
    workdir = make_workdir(options.workdir, "streaming-app-peer-")
    results = peer(workdir, options.files, options.lines_per_file, options.rounds)
    print("\n".join(peer_report(results)))
    print(f"\n(logs, metrics and progress in {results['workdir']})", file=sys.stderr)
