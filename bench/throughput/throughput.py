"""Throughput: words/s the app sustains, per optimization, against a single-process baseline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness.app import BATCH_S
from bench.harness.corpus import WORDS_PER_LINE, baseline_seconds, load_topic
from bench.harness.rates import interleaved, runner
from bench.harness.results import median

# Lines per batch tried for the sustained rate.
BATCH_SIZES = (20_000, 80_000, 140_000, 170_000, 200_000, 230_000, 260_000)


# What each optimization adds, measured side by side on the throughput topic: the
# layout of 0.2.0 first, the defaults last. Each row keeps the changes of the rows above.
OPTIMIZATIONS = (
    ("0.2.0: one state record per key, stock worker daemon",
     ("--state-buckets", "0", "--spark-conf", "spark.python.daemon.module=pyspark.daemon")),
    ("+ workers forked from a preloaded, gc-frozen daemon", ("--state-buckets", "0")),
    ("+ state in 64 buckets, a batch merged into it in one shuffle (the defaults now)", ()),
)  # fmt: skip

BASELINE_WITHOUT_C_CRC = (
    "import sys; sys.modules['crc32c'] = None; sys.path.insert(0, {root!r}); "
    "from bench.harness.corpus import baseline_seconds; "
    "print(baseline_seconds({bs!r}, {topic!r}, {lines}))"
)


def baseline_without_c_crc(bootstrap: str, topic: str, lines: int) -> float:
    """baseline_seconds with kafka-python's pure-Python CRC-32C, in a subprocess."""
    code = BASELINE_WITHOUT_C_CRC.format(
        root=str(Path(__file__).resolve().parents[2]), bs=bootstrap, topic=topic, lines=lines
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


# Batches per run when looking for the sustained rate (the first two and the last are
# not steady).
SUSTAINED_RUN_BATCHES = 8


def size_keeps_up(figures: dict[str, Any]) -> bool:
    """A batch size keeps up when most of its runs did (figures of `interleaved`)."""
    return 2 * figures["runs_kept_up"] > figures["runs"]


def sustained_lines(tried: list[dict[str, Any]]) -> int:
    """The largest batch size that keeps up with every smaller size tried (0: none).

    On a noisy machine a size can keep up where a smaller one did not; the rate is the
    one below the first size that did not.
    """
    best = 0
    for size in sorted(tried, key=lambda t: t["batch_lines"]):
        if not size["keeps_up"]:
            break
        best = size["batch_lines"]
    return best


def throughput(
    workdir: Path,
    bootstrap: str,
    lines: int,
    batch_lines: int,
    runs: int,
    variants: Any,
    sizes: tuple[int, ...],
    rounds: int,
) -> Any:
    """Words/s the app sustains, and per optimization, vs the baseline, on one topic.

    The baseline and every variant (optimizations switched off, cumulatively) read the
    first `lines` lines; the last variant is the app as it ships. Then the app as it
    ships reads batches of each of `sizes` lines: the largest that keeps up, as every
    smaller one does, is the sustained rate.
    """
    topic = load_topic(bootstrap, max(lines, max(sizes) * SUSTAINED_RUN_BATCHES))
    baseline = [baseline_seconds(bootstrap, topic, lines) for _ in range(runs)]
    slow_crc = [baseline_without_c_crc(bootstrap, topic, lines) for _ in range(runs)]
    base_words = lines * WORDS_PER_LINE / median(baseline)
    by_variant = interleaved(rounds, {
        index: runner(workdir, f"throughput-{index}", bootstrap, topic, lines, batch_lines,
                      "--checkpoint-interval", "20", *extra)
        for index, (_, extra) in enumerate(variants)
    })  # fmt: skip
    rows = [{"variant": label, **by_variant[i]} for i, (label, _) in enumerate(variants)]
    for row in rows:
        row["ratio"] = round(row["words_per_s"] / base_words, 2)
    by_size = interleaved(rounds, {
        size: runner(workdir, f"sustained-{size}", bootstrap, topic,
                     size * SUSTAINED_RUN_BATCHES, size, "--checkpoint-interval", "20")
        for size in sizes
    })  # fmt: skip
    tried = [{**f, "keeps_up": size_keeps_up(f)} for f in by_size.values()]
    best = sustained_lines(tried)
    sustained = best * WORDS_PER_LINE / BATCH_S
    return {
        "lines": lines,
        "baseline_s": round(median(baseline), 2),
        "baseline_words_per_s": round(base_words),
        "baseline_python_crc_s": round(median(slow_crc), 2),
        "baseline_python_crc_words_per_s": round(lines * WORDS_PER_LINE / median(slow_crc)),
        "sustained_batch_lines": best,
        "sustained_words_per_s": round(sustained),
        "ratio": round(sustained / base_words, 2),
        "tried": tried,
        "variants": rows,
    }


def runs_of(figures: dict[str, Any]) -> str:
    """Each run's median processing time, for a table cell."""
    return ", ".join(f"{s} s" for s in figures["runs_processing_s"])


def throughput_report(t: dict[str, Any], runs: int) -> list[str]:
    """The throughput, batch size and optimization tables of docs/benchmarks.md."""
    return [
        "**Throughput, console sink alone** (not the exact configuration, which adds the "
        "files sink: the table above; Kafka source, `local[2]`, 2 s batches, `--sink "
        "console`; lines of 10 words over a Zipf vocabulary of 100k words):",
        "",
        "| | words/s | how |",
        "|---|---|---|",
        f"| baseline: one kafka-python consumer + `Counter` | {t['baseline_words_per_s']:,} | "
        f"median of {runs} runs: {t['baseline_s']} s for {t['lines']:,} lines |",
        f"| streaming_app, sustained | {t['sustained_words_per_s']:,} | the largest batch "
        f"tried that keeps up, as every smaller one does: {t['sustained_batch_lines']:,} "
        "lines every 2 s (below) |",
        f"| **ratio app / baseline** | **{t['ratio']}** | |",
        "",
        f"Batch sizes tried ({t['tried'][0]['runs']} runs each, interleaved, the app as "
        "it ships; a run keeps up when its median processing time is within the 2 s "
        "interval and the scheduling delay does not grow from its first steady batch to "
        "its last; a size keeps up when most of its runs do; figures are medians over the "
        "runs):",
        "",
        "| lines per batch | processing of a batch | each run | words/s of processing | "
        "scheduling delay, first → last steady batch | runs that kept up | keeps up |",
        "|---|---|---|---|---|---|---|",
        *[
            f"| {x['batch_lines']:,} | {x['processing_s']} s | {runs_of(x)} | "
            f"{x['words_per_s']:,} | "
            f"{x['first_scheduling_delay_s']} s → {x['last_scheduling_delay_s']} s | "
            f"{x['runs_kept_up']} of {x['runs']} | {'yes' if x['keeps_up'] else 'no'} |"
            for x in t["tried"]
        ],
        "",
        "**Optimizations, before and after** (the same topic, batches of "
        f"{t['variants'][-1]['batch_lines']:,} lines, {t['variants'][-1]['runs']} runs of "
        "each, interleaved, medians; each row keeps the changes above it; both sides use "
        "kafka-python's C CRC-32C, see the last row):",
        "",
        "| | processing of a batch | each run | words/s of processing | ratio to the baseline |",
        "|---|---|---|---|---|",
        *[
            f"| {v['variant']} | {v['processing_s']} s | {runs_of(v)} | "
            f"{v['words_per_s']:,} | {v['ratio']} |"
            for v in t["variants"]
        ],
        f"| the baseline itself, with kafka-python's pure-Python CRC-32C (no `crc32c` "
        f"package) | {t['baseline_python_crc_s']} s for the topic | | "
        f"{t['baseline_python_crc_words_per_s']:,} | |",
    ]
