"""The state as it grows: batch time per vocabulary size, and a state of many keys, per layout."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from bench.harness.corpus import PARTITIONS, WORDS_PER_LINE, distinct_words, load_topic
from bench.harness.rates import app_rate
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.tools.produce import generated_lines, produce

# The state layouts compared where the state grows: before (0.2.0) and now.
LAYOUTS = (
    ("one state record per key (0.2.0)", ("--state-buckets", "0")),
    ("64 buckets (now)", ()),
)


def state_growth(
    workdir: Path,
    bootstrap: str,
    lines: int,
    batch_lines: int,
    vocabularies: tuple[int, ...],
    layouts: Any = LAYOUTS,
) -> Any:
    """Batch processing time as the state holds more keys: per vocabulary size and layout."""
    found = {}
    for vocabulary in vocabularies:
        topic = load_topic(bootstrap, lines, seed=4, vocabulary=vocabulary)
        keys = distinct_words(lines, seed=4, vocabulary=vocabulary)
        found_layouts = {}
        for index, (label, extra) in enumerate(layouts):
            found_layouts[label] = app_rate(
                workdir, f"state-{vocabulary}-{index}", bootstrap, topic, lines, batch_lines,
                "--checkpoint-interval", "20", *extra,
            )  # fmt: skip
        found[str(vocabulary)] = {"keys_at_end": keys, "layouts": found_layouts}
    return found


def key_topic(bootstrap: str, keys: int, lines: int) -> tuple[str, int]:
    """A topic with every key once (`w0`..), then `lines` Zipf lines over the same keys.

    Returns the topic and how many lines load the keys.
    """
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    every_key = (
        " ".join(f"w{n}" for n in range(start, min(start + WORDS_PER_LINE, keys)))
        for start in range(0, keys, WORDS_PER_LINE)
    )
    loading = -(-keys // WORDS_PER_LINE)
    produce(KafkaConnection(bootstrap), topic, every_key, loading, 0, PARTITIONS)
    zipf = generated_lines(WORDS_PER_LINE, keys, seed=5)
    produce(KafkaConnection(bootstrap), topic, zipf, lines, 0, PARTITIONS)
    return topic, loading


def state_of_keys(
    workdir: Path, bootstrap: str, keys: int, lines: int, batch_lines: int, variants: Any
) -> Any:
    """Batch time and peak memory once the state holds `keys` keys, per state layout.

    The topic first has every key once (`w0`..), then `lines` Zipf lines over the same
    keys; the figures are those of the batches after the state is full.
    """
    topic, loading = key_topic(bootstrap, keys, lines)
    found = []
    for index, (label, extra) in enumerate(variants):
        figures = app_rate(
            workdir, f"keys-{index}", bootstrap, topic, loading + lines, batch_lines,
            "--checkpoint-interval", "20", *extra, skip_lines=loading, memory=True,
        )  # fmt: skip
        found.append({"variant": label, **figures})
    return {
        "keys": keys,
        "lines": lines,
        "variants": found,
        "topic": topic,
        "loading_lines": loading,
    }


def state_report(growth: dict[str, Any], k: dict[str, Any]) -> list[str]:
    """The state growth and state of keys tables of docs/benchmarks.md."""
    # In LAYOUTS' order (before, then now) also when read back from results.json.
    measured = next(iter(growth.values()))["layouts"]
    layouts = [label for label, _ in LAYOUTS if label in measured]
    return [
        "**State growth** (the same kind of run, one per vocabulary size and state layout, "
        "checkpoint every 10 batches; keys: distinct words of the whole corpus, which the "
        "state holds at the end; processing of a batch of the same 20,000 lines):",
        "",
        f"| vocabulary | keys at the end | {' | '.join(layouts)} |",
        "|---|---|" + "---|" * len(layouts),
        *[
            f"| {int(v):,} words | {g['keys_at_end']:,} | "
            + " | ".join(f"{g['layouts'][label]['processing_s']} s" for label in layouts)
            + " |"
            for v, g in growth.items()
        ],
        "",
        f"**A state of {k['keys']:,} keys** (the topic holds every key once, then "
        f"{k['lines']:,} Zipf lines over them; figures of the batches after the state is "
        "full; peak resident memory of the app's processes over the whole run):",
        "",
        "| state layout | processing of a batch | words/s | driver (Python) | JVM | "
        "largest Python worker | Python workers together (Pss) |",
        "|---|---|---|---|---|---|---|",
        *[
            f"| {v['variant']} | {v['processing_s']} s | {v['words_per_s']:,} | "
            f"{v['driver_mib']} MiB | {v['jvm_mib']} MiB | {v['largest_worker_mib']} MiB | "
            f"{v['workers_together_mib']} MiB |"
            for v in k["variants"]
        ],
    ]
