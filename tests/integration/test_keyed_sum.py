"""The keyed-sum job on CSV files: exact decimal totals per key across kill -9, bad rows skipped."""

from __future__ import annotations

import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from streaming_app.sinks.postgres.writer import read_totals as read_pg_totals
from tests.integration.batch_waits import files_batches, kill_mid_batch, wait_more_batches
from tests.integration.conftest import files_args, kafka_args
from tests.integration.harness import drop_file, wait_for_totals, window_outputs
from tests.integration.kafka_helpers import fresh_topic, log_entries, read_by_offset, send
from tests.integration.pg_helpers import postgres_config

pytestmark = pytest.mark.timeout(300)
HEADER = "transactionId,customerId,itemId,amountPaid"


def sales(rng: random.Random, first_id: int, rows: int) -> tuple[str, list[tuple[str, Decimal]]]:
    """A CSV file of sales and its (customer, amount) pairs, amounts with cents."""
    pairs = [
        (f"c{rng.randint(1, 12)}", Decimal(rng.randint(-500, 50_000)) / 100) for _ in range(rows)
    ]
    lines = [HEADER] + [
        f"{first_id + i},{customer},item{rng.randint(1, 99)},{amount}"
        for i, (customer, amount) in enumerate(pairs)
    ]
    return "\n".join(lines) + "\n", pairs


def expected_sums(pairs: list[tuple[str, Decimal]]) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = {}
    for customer, amount in pairs:
        sums[customer] = sums.get(customer, Decimal(0)) + amount
    return sums


def test_keyed_sum_is_exact_across_kill_9_and_skips_bad_rows(
    dirs: dict[str, Path], start_app: Any, pg_dsn: str, pg_table: str, tmp_path: Path
) -> None:
    rng = random.Random(42)
    config = postgres_config(tmp_path, pg_dsn)
    with config.open("a") as ini:
        ini.write(f"[csv]\ncsv_fields = {HEADER}\n")
    args = files_args(
        dirs,
        "--job", "keyed-sum", "--key-field", "customerId", "--value-field", "amountPaid",
        "--sink", "postgres", "--postgres-table", pg_table, "--config", str(config),
    )  # fmt: skip
    pairs: list[tuple[str, Decimal]] = []
    next_id = 1000

    def add(name: str, rows: int, bad: str = "") -> None:
        nonlocal next_id
        text, new = sales(rng, next_id, rows)
        next_id += rows
        pairs.extend(new)
        drop_file(dirs["input"], name, (text + bad).encode())

    app = start_app(*args)
    app.wait_for_log(r"Started new streaming context")
    add("s1.csv", 50, bad="9,c1,item\n10,c2,item,12,5\n11,c3,item,abc\n12,,item,1.00\n")
    wait_for_totals(dirs["output"], expected_sums(pairs), app)
    warning = app.wait_for_log(r"skipped (\d+) bad CSV rows \(([^)]*)\)")
    assert warning.group(1) == "4"
    assert "wrong field count=2" in warning.group(2)
    assert "amountPaid not a number=1" in warning.group(2)
    assert "customerId empty=1" in warning.group(2)
    assert "'9,c1,item'" in app.log()  # a sample of what was skipped

    # Kill -9 mid-batch (checked): the batch that read a new file planned, its output not done.
    batches = files_batches(dirs["checkpoint"], dirs["output"])
    kill_mid_batch(app, batches, lambda: add(f"s2-{next_id}.csv", 80))
    add("s3-while-down.csv", 30)
    app = start_app(*args)
    app.wait_for_log(r"Recovered streaming context from checkpoint")
    add("s4.csv", 40)
    expected = expected_sums(pairs)
    wait_for_totals(dirs["output"], expected, app)
    wait_more_batches(app)  # more batches: a replay would double the sums now
    wait_for_totals(dirs["output"], expected, app, timeout=5)
    assert app.terminate() == 0

    assert read_pg_totals(pg_dsn, pg_table) == expected  # numeric column, exact
    printed = subprocess.run(
        [sys.executable, "-m", "streaming_app", "totals", "--output-dir", str(dirs["output"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert lines == [f"{key}\t{expected[key]:f}" for key in sorted(expected)]
    assert any("." in line for line in lines)  # cents, not floats or integers


def test_keyed_sum_over_kafka_records(
    dirs: dict[str, Path], start_app: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(9)
    topic = fresh_topic("sales")
    text, pairs = sales(rng, 1, 300)
    # One odd amount, one bad row, and a refund that takes a key back to zero.
    records = [*text.splitlines()[1:], "1,c1,item,1e-2", "2,c2,item", "3,cz,i,5", "4,cz,i,-5.00"]
    pairs += [("c1", Decimal("0.01")), ("cz", Decimal(5)), ("cz", Decimal("-5.00"))]
    send(kafka_bootstrap, topic, records, partitions=2)
    config = tmp_path / "csv.ini"
    config.write_text(f"[csv]\ncsv_fields = {HEADER}\n")
    app = start_app(
        *kafka_args(dirs, kafka_bootstrap, topic),
        "--job", "keyed-sum", "--key-field", "customerId", "--value-field", "amountPaid",
        "--config", str(config), "--window", "10", "--slide", "2",  # 5 slides: inverse
    )  # fmt: skip
    expected = expected_sums(pairs)
    wait_for_totals(dirs["output"], expected, app)
    assert app.wait_for_log(r"skipped (\d+) bad CSV rows").group(1) == "1"
    assert app.terminate() == 0
    # Every window, against sums computed from the topic and the offset log's batch times.
    by_offset = read_by_offset(kafka_bootstrap, topic)
    batches: dict[int, list[tuple[str, Decimal]]] = {}
    for batch_ms, entry in log_entries(dirs["checkpoint"], "offsets").items():
        for _, partition, start, end in entry["ranges"]:
            for offset in range(start, end):
                fields = (by_offset[(partition, offset)] or b"").decode().split(",")
                if len(fields) == 4:
                    batches.setdefault(batch_ms, []).append((fields[1], Decimal(fields[3])))
    windows = window_outputs(dirs["output"])
    for end, window in windows.items():
        inside = [p for b, ps in batches.items() if end - 10_000 < b <= end for p in ps]
        # A key stays while a batch in the window has it, even at a sum of zero (cz).
        assert window == expected_sums(inside), end
    assert any(windows.values())
    assert any(w.get("cz") == 0 for w in windows.values()), "the refunded key left the window"
