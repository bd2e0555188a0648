"""The files source end to end: exact totals, undecodable bytes replaced, graceful stop."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from streaming_app.sinks.files_layout import latest_totals_dir, read_totals
from tests.integration.conftest import files_args
from tests.integration.harness import drop_file, make_text, truth, wait_for_totals
from tests.integration.log_lines import CONTEXT_STARTED

pytestmark = pytest.mark.timeout(300)


# Both state layouts: 64 buckets (the default) and 0.2.0's one record per key. The second
# also turns off every optional reach into PySpark's internals (docs/internals.md): the
# state's buckets, the preloaded worker daemon, the JVM's class archive.
OPTIONAL_REACHES_OFF = (
    "--state-buckets", "0", "--spark-conf", "spark.python.daemon.module=pyspark.daemon",
)  # fmt: skip


@pytest.mark.parametrize(
    "layout", [(), OPTIONAL_REACHES_OFF], ids=["buckets", "per-key-no-optional-internals"]
)
def test_files_source_counts_exactly_and_replaces_undecodable_bytes(
    dirs: dict[str, Path], start_app: Any, layout: tuple[str, ...]
) -> None:
    rng = random.Random(7)
    env = {"STREAMING_APP_JVM_ARCHIVE": "0"} if layout else None
    app = start_app(*files_args(dirs, "--sink", "console", *layout), env=env)
    app.wait_for_log(CONTEXT_STARTED)
    texts = [make_text(rng, 50) for _ in range(3)]
    for i, text in enumerate(texts):
        drop_file(dirs["input"], f"part{i}.txt", text.encode())
    # Invalid UTF-8 between words: replaced (U+FFFD separates words), never a crash.
    broken = "w01 w02 \xff\xfe w03\n".encode("latin-1") + b"w04 \xc3\x28 w05\n"
    drop_file(dirs["input"], "broken.txt", broken)
    # "\xc3\x28" decodes to U+FFFD and "(", both separators.
    expected = truth([*texts, "w01 w02 w03\nw04 w05\n"])

    wait_for_totals(dirs["output"], expected, app)
    assert app.terminate() == 0
    # The console sink printed the seed-familiar line with the top words.
    out = app.out_path.read_text()
    top_word = max(expected, key=lambda w: (expected[w], [-ord(c) for c in w]))
    assert f"('{top_word}', {expected[top_word]})" in out
    assert "Counts at time " in out
    # The output directory keeps only whole, named-by-epoch-ms batches.
    latest = latest_totals_dir(str(dirs["output"]))
    assert latest is not None and latest[0] > 1_700_000_000_000
    reached, totals = read_totals(str(dirs["output"]))
    assert reached is not None and reached >= latest[0] and totals == expected


def test_sigterm_stops_gracefully_and_the_restart_resumes(
    dirs: dict[str, Path], start_app: Any
) -> None:
    rng = random.Random(11)
    texts: list[str] = []
    first = start_app(*files_args(dirs))
    first.wait_for_log(CONTEXT_STARTED)
    for i in range(2):
        texts.append(make_text(rng, 40))
        drop_file(dirs["input"], f"a{i}.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), first)
    assert first.terminate() == 0
    assert "Stopping gracefully (SIGTERM)" in first.log()

    texts.append(make_text(rng, 40))
    drop_file(dirs["input"], "while-stopped.txt", texts[-1].encode())
    second = start_app(*files_args(dirs))
    second.wait_for_log(r"Recovered streaming context from checkpoint .* at batch_time_ms=\d+")
    assert "Creating new context" not in second.log()
    assert "Started new streaming context" not in second.log()
    texts.append(make_text(rng, 40))
    drop_file(dirs["input"], "after-restart.txt", texts[-1].encode())
    wait_for_totals(dirs["output"], truth(texts), second)
    assert second.terminate() == 0
