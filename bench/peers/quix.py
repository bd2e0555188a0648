"""streaming_app against quixstreams, a Python stream processor, on the same corpus.

    python bench/run.py --only quix [--smoke]

quixstreams runs bench/peers/quix_job.py in a virtualenv of its own (.venv-quix at the top of
the checkout, made on first use with the pinned QUIXSTREAMS), so that it shares no package
with the app. Side by side in one invocation, on one broker:
- the app in the exact configuration at the headline batch size (bench/throughput/exact.py), on a
  topic of the corpus long enough for its steady batches, and the baseline (one
  kafka-python consumer + Counter) on the same topic;
- quixstreams' word count on a topic of the first QUIX_LINES lines of the same corpus,
  read from the beginning: its default at-least-once and its exactly-once, each handing
  its totals on to a topic; exactly-once in two instances (both cores); and, labelled, the
  least it can do (at-least-once, no output); the totals it sent on, read back from its
  output topic, against the corpus's own count.
A restart after kill -9 is not measured: quixstreams' recovery compares the offset its
state store holds with its changelog topic's high watermark, which tansu 0.6 reports low
(docs/benchmarks.md), and refuses to start (InvalidStoreChangelogOffset).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any

from bench.harness.corpus import (
    PARTITIONS,
    VOCABULARY,
    WORDS_PER_LINE,
    baseline_seconds,
    load_topic,
)
from bench.harness.rates import runner
from bench.harness.results import median
from bench.harness.side_runs import steady_cycle
from bench.throughput.exact import ratio
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.processes import stop_group
from streaming_app.tools.produce import generated_lines, produce

ROOT = Path(__file__).resolve().parents[2]
QUIXSTREAMS = "quixstreams==3.28.1"
QUIX_VENV = ROOT / ".venv-quix"
JOB = Path(__file__).resolve().with_name("quix_job.py")
QUIX_LINES = 50_000
# tansu holds a new consumer group's join for half the session timeout (22.5 s at
# librdkafka's default of 45 s) where Apache Kafka holds it for
# group.initial.rebalance.delay.ms (3 s by default): with 6 s the join costs quixstreams
# here what it costs against Kafka's defaults.
SESSION_TIMEOUT_MS = 6000
AT_LEAST_ONCE, EXACTLY_ONCE = "at-least-once", "exactly-once"
# (label, guarantee, instances, totals sent on to a topic)
VARIANTS = (
    ("at-least-once (its default), totals to a topic", AT_LEAST_ONCE, 1, True),
    ("exactly-once, totals to a topic", EXACTLY_ONCE, 1, True),
    ("exactly-once, totals to a topic, 2 instances", EXACTLY_ONCE, 2, True),
    ("at-least-once, no output (the least it can do; not a job)", AT_LEAST_ONCE, 1, False),
)


def quix_python(venv: Path = QUIX_VENV) -> Path:
    """The interpreter of a virtualenv holding QUIXSTREAMS; made (or brought to it) on
    first use, from PyPI."""
    python, stamp = venv / "bin" / "python", venv / ".bench-installed"
    if python.exists() and stamp.exists() and stamp.read_text() == QUIXSTREAMS:
        return python
    print(f"==> installing {QUIXSTREAMS} into {venv} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", QUIXSTREAMS], check=True)
    stamp.write_text(QUIXSTREAMS)
    return python


def quix_topic(bootstrap: str, lines: int) -> tuple[str, Counter[str]]:
    """A topic of the first `lines` lines of load_topic's corpus, and their words counted.

    Made with a retention: quixstreams copies the input's retention.ms to the topics it
    makes, and tansu, unlike Kafka, reports none for a topic made without one."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    topic = f"quix-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1, topic_configs={
            "retention.ms": "-1", "retention.bytes": "-1"})])  # fmt: skip
    finally:
        admin.close()
    corpus = list(islice(generated_lines(WORDS_PER_LINE, VOCABULARY, 1), lines))
    produce(KafkaConnection(bootstrap), topic, iter(corpus), lines, 0, PARTITIONS)
    return topic, Counter(word for line in corpus for word in line.split())


class QuixJob:
    """bench/peers/quix_job.py counting a topic, in a session of its own (a stop takes it all)."""

    def __init__(self, python: Path, workdir: Path, name: str, args: list[str]) -> None:
        self.result = workdir / f"{name}.json"
        self.log = workdir / f"{name}.log"
        self.result.unlink(missing_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [str(python), str(JOB), "count", *args, "--result", str(self.result)],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    def finish(self, timeout: float) -> dict[str, Any]:
        """Wait for it to stop (once its topic is quiet); what it wrote."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(self.proc, grace=30)
            code = None
        if code != 0 or not self.result.exists():
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"quixstreams job ended with {code}:\n{tail}")
        found: dict[str, Any] = json.loads(self.result.read_text())
        return found


def job_args(bootstrap: str, topic: str, group: str, state: Path, guarantee: str,
             output: str | None, idle: float) -> list[str]:  # fmt: skip
    """quix_job.py count's arguments."""
    return [
        "--broker", bootstrap, "--topic", topic, "--group", group, "--state-dir", str(state),
        "--guarantee", guarantee, "--idle", str(idle),
        "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
        *(["--output", output] if output else []),
    ]  # fmt: skip


def quix_rate(
    python: Path, workdir: Path, bootstrap: str, topic: str, truth: Counter[str],
    guarantee: str, instances: int, output: bool, name: str,
) -> dict[str, Any]:  # fmt: skip
    """quixstreams' job on the topic from its beginning, in `instances` processes of one
    consumer group: the topic's words over the time from its first word counted to its
    last, its start to the first word, and whether the totals it sent on are the corpus's."""
    group = f"{name}-{uuid.uuid4().hex[:6]}"
    out = f"{group}-totals" if output else None
    words = sum(truth.values())
    jobs = [
        QuixJob(python, workdir, f"{name}-{i}",
                job_args(bootstrap, topic, group, workdir / f"{name}-state-{i}", guarantee,
                         out, idle=10))
        for i in range(instances)
    ]  # fmt: skip
    try:
        found = [job.finish(timeout=120 + words / 2_000) for job in jobs]
    finally:  # one instance failed: the others go too
        for job in jobs:
            if job.proc.poll() is None:
                stop_group(job.proc, grace=10)
    if not any(f["first"] for f in found):
        raise RuntimeError(f"{name}: no instance counted a word (logs: {workdir}/{name}-*.log)")
    first = min(f["first"] for f in found if f["first"])
    last = max(f["last"] for f in found if f["last"])
    return {
        "words_per_s": round(words / (last - first)),
        "start_s": round(first - min(f["started"] for f in found), 1),
        "exact": read_totals(python, bootstrap, out) == truth if out else None,
    }


def read_totals(python: Path, bootstrap: str, topic: str) -> dict[str, int]:
    """The last total of every word on a job's output topic (committed transactions)."""
    done = subprocess.run(
        [str(python), str(JOB), "totals", "--broker", bootstrap, "--topic", topic],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    found: dict[str, int] = json.loads(done.stdout)
    return found


def quix_bench(
    workdir: Path, bootstrap: str, quix_lines: int, runs: int, headline: int, every: int,
    baseline_lines: int,
) -> dict[str, Any]:  # fmt: skip
    """The app and quixstreams side by side (see the module's docstring); the baseline
    over the first `baseline_lines` lines of the app's topic, as bench/throughput/exact.py's."""
    python = quix_python()
    app_lines = headline * (every + 3)
    topic = load_topic(bootstrap, app_lines)
    baseline_lines = min(baseline_lines, app_lines)
    baseline = median([baseline_seconds(bootstrap, topic, baseline_lines) for _ in range(runs)])
    base_words = baseline_lines * WORDS_PER_LINE / baseline
    quix_in, truth = quix_topic(bootstrap, quix_lines)
    app_run = runner(workdir, "app-exact", bootstrap, topic, app_lines, headline,
                     exact=every, per_batch=steady_cycle(every))  # fmt: skip
    app_runs: list[dict[str, Any]] = []
    quix_runs: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in VARIANTS}
    for number in range(runs):  # round after round: drift hits all alike
        app_runs.append(app_run(f"r{number}"))
        for index, (label, guarantee, instances, output) in enumerate(VARIANTS):
            quix_runs[label].append(quix_rate(python, workdir, bootstrap, quix_in, truth,
                                              guarantee, instances, output,
                                              f"quix{index}-r{number}"))  # fmt: skip
    app_words = [r["mean_words_per_s"] for r in app_runs]
    quix_words = {label: [r["words_per_s"] for r in runs] for label, runs in quix_runs.items()}
    return {
        "baseline_lines": baseline_lines,
        "baseline_runs": runs,
        "baseline_words_per_s": round(base_words),
        "headline_lines": headline,
        "checkpoint_batches": every,
        "app": {
            "words_per_s": round(median(app_words)),
            "runs_words_per_s": app_words,
            "processing_s": round(median([r["processing_s"] for r in app_runs]), 3),
            "ratio": ratio(median(app_words), base_words),
        },
        "quix_lines": quix_lines,
        "quix_words": sum(truth.values()),
        "quix_keys": len(truth),
        "quix": [
            {
                "label": label,
                "guarantee": guarantee,
                "instances": instances,
                "words_per_s": round(median(quix_words[label])),
                "runs_words_per_s": quix_words[label],
                "start_s": round(median([r["start_s"] for r in quix_runs[label]]), 1),
                "ratio": ratio(median(quix_words[label]), base_words),
                "exact": [r["exact"] for r in quix_runs[label]],
            }
            for label, guarantee, instances, _ in VARIANTS
        ],
    }


def _exact(runs: list[bool | None]) -> str:
    if runs[0] is None:
        return "— (no output)"
    return f"{'yes' if all(runs) else 'no'} ({sum(map(bool, runs))} of {len(runs)} runs)"


def quix_report(q: dict[str, Any]) -> list[str]:
    """The quixstreams tables of docs/benchmarks.md."""
    headline, base = q["headline_lines"], q["baseline_words_per_s"]
    app, runs = q["app"], len(q["app"]["runs_words_per_s"])
    lines = [
        f"**streaming_app against quixstreams** ({QUIXSTREAMS}; Kafka on loopback, "
        f"{PARTITIONS} partitions, lines of 10 words over a Zipf vocabulary of 100k words). "
        f"The app in the exact configuration at {headline:,}-line batches: words/s of "
        f"processing over {q['checkpoint_batches']} steady batches. quixstreams' job "
        "(bench/peers/quix_job.py: split, `group_by` the word, a stateful count, each new total "
        f"sent to a topic) reads a topic of the corpus's first {q['quix_lines']:,} lines "
        f"({q['quix_words']:,} words, {q['quix_keys']:,} distinct) from its beginning: "
        "words/s from its first word counted to its last. The baseline, one kafka-python "
        f"consumer + `Counter`, on the app's topic. Medians of {runs} runs, round after round:",
        "",
        "| | words/s | ratio to the baseline | start to the first word | totals exact | each run |",
        "|---|---|---|---|---|---|",
        f"| baseline: one kafka-python consumer + `Counter` | {base:,} | 1 | | | |",
        f"| **streaming_app, files + console sinks, {headline:,}-line batches** | "
        f"**{app['words_per_s']:,}** | **{app['ratio']}** | | yes (tests/integration/"
        "test_kafka_chaos.py) | " + ", ".join(f"{w:,}" for w in app["runs_words_per_s"]) + " |",
    ]
    for v in q["quix"]:
        lines.append(
            f"| quixstreams, {v['label']} | {v['words_per_s']:,} | {v['ratio']} | "
            f"{v['start_s']} s | {_exact(v['exact'])} | "
            + ", ".join(f"{w:,}" for w in v["runs_words_per_s"])
            + " |"
        )
    return lines
