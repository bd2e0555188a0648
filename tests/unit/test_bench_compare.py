"""compare --exact's warm-up and extra sides: the lines, the measured window, the options."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import bench.compare as compare
import bench.compare_cli as compare_cli
import bench.harness.rates as rates
import bench.throughput.exact as exact
from bench.harness.env_side import env_side
from bench.harness.periodic import kinds
from bench.harness.rates import steady_batches
from bench.run import SMOKE
from bench.throughput.exact import exact_report, exact_throughput, run_lines
from streaming_app.common.jvm_archive import ENV as ARCHIVE_ENV
from streaming_app.common.metrics_record import BatchMetrics

FIRST_MS = 1_795_420_092_000  # a batch time that is no multiple of 10 batches


def _batches(count: int, records: int) -> list[BatchMetrics]:
    return [
        BatchMetrics(FIRST_MS + n * 2000, 2000, records, 500, 0, 500, 0, FIRST_MS + n * 2000)
        for n in range(count)
    ]


def test_a_run_reads_its_warm_up_and_skips_it_before_the_window() -> None:
    # 120 unmeasured batches, the 2 of warm-up, 10 steady ones, a last one left out.
    assert run_lines(60_000, 10, 120) == (60_000 * 133, 60_000 * 122)
    # No warm-up: the lines of old, and the first two batches skipped by position.
    assert run_lines(60_000, 10) == (60_000 * 13, 0)


@pytest.mark.parametrize("warmup", [0, 1, 7, 120])
def test_the_window_after_a_warm_up_is_one_whole_checkpoint_interval(warmup: int) -> None:
    lines, skip = run_lines(400, 10, warmup)
    busy = _batches(lines // 400, 400)
    steady = steady_batches(busy, [400] * len(busy), skip)
    assert steady == busy[warmup + 2 : -1] and len(steady) == 10
    # One aligned batch and one that wrote Spark's checkpoint (counted from the run's first).
    found = [kinds(b, FIRST_MS, 10) for b in steady]
    assert sum(a for a, _ in found) == 1 and sum(c for _, c in found) == 1


class _FakeApp:
    """An app whose batches complete as the harness waits for them, with CPU per batch."""

    def __init__(self, batches: list[BatchMetrics], cpu_s: Callable[[int], float]) -> None:
        self.all, self.cpu_s, self.seen = batches, cpu_s, 0
        self.proc = argparse.Namespace(pid=4242)

    def wait_for(self, done: Callable[[list[BatchMetrics]], bool], timeout: float) -> Any:
        while not done(self.all[: self.seen]):
            self.seen += 1
            assert self.seen <= len(self.all), "waited past the end of the run"
        return self.all[: self.seen]

    def batches(self) -> list[BatchMetrics]:
        return self.all

    def stop(self) -> None:
        pass


def test_the_cpu_per_line_counts_only_the_batches_after_the_warm_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warmup, every, size = 5, 4, 1000
    lines, skip = run_lines(size, every, warmup)
    # The warm-up's batches cost 9 CPU seconds each, the others 1 s: 1000 ms per 1000 lines.
    app = _FakeApp(
        _batches(lines // size, size), lambda n: 9.0 * min(n, warmup + 2) + max(0, n - warmup - 2)
    )
    monkeypatch.setattr(rates.AppRun, "start", lambda *a, **k: app)
    monkeypatch.setattr(rates, "session_cpu_s", lambda pid: app.cpu_s(app.seen))
    found = rates.app_rate(tmp_path, "r", "b:1", "t", lines, size, skip_lines=skip, cpu=True)
    assert found["cpu_ms_per_kline"] == 1000.0
    assert found["batches"] == every


def _fake_runs(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[dict[str, Any]]]:
    """exact_throughput without a broker or an app: the topic's lines and each run's call."""
    topics: list[int] = []
    calls: list[dict[str, Any]] = []

    def runner(workdir: Path, name: str, *args: Any, **options: Any) -> Any:
        def run(suffix: str) -> dict[str, Any]:
            calls.append({"name": f"{name}-{suffix}", "lines": args[2], **options})
            return {"processing_s": 1.0, "words_per_s": 500, "mean_words_per_s": 500,
                    "cpu_ms_per_kline": 20.0, "aligned_s": 1.0, "checkpoint_s": 1.0,
                    "max_s": 1.0, "mean_processing_s": 1.0}  # fmt: skip

        return run

    monkeypatch.setattr(exact, "load_topic", lambda _b, lines: topics.append(lines) or "topic")
    monkeypatch.setattr(exact, "baseline_seconds", lambda *_: 1.0)
    monkeypatch.setattr(exact, "two_process_seconds", lambda *_: 1.0)
    monkeypatch.setattr(exact, "runner", runner)
    return topics, calls


def test_every_run_reads_the_warm_up_and_measures_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics, calls = _fake_runs(monkeypatch)
    sides: Any = (
        ("before", tmp_path),
        ("after", None),
        ("jit", None, {"STREAMING_APP_JVM_C1": "0"}),
    )
    found = exact_throughput(tmp_path, "b:1", (400,), 2, 2000, 1, 400, 2, sides=sides, warmup=3)
    assert topics == [400 * (3 + 2 + 3)]  # 3200 lines: more than the baseline's 2000
    assert {(c["lines"], c["skip_lines"]) for c in calls} == {(3200, 400 * 5)}
    # The extra side runs this checkout with its environment, interleaved in each round.
    assert [(c["code"], c["env"]) for c in calls[:3]] == [
        (tmp_path, None), (None, None), (None, {"STREAMING_APP_JVM_C1": "0"})
    ]  # fmt: skip
    assert [c["name"][-2:] for c in calls] == ["r1"] * 6 + ["r2"] * 6  # then the console's
    text = "\n".join(exact_report(found))
    assert "Each run processed 3 unmeasured batches first (6 s)" in text
    assert "| **streaming_app, files + console sinks, 400-line batches, jit** |" in text


def test_without_a_warm_up_the_runs_are_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics, calls = _fake_runs(monkeypatch)
    found = exact_throughput(tmp_path, "b:1", (400,), 1, 2000, 1, 400, 2)
    assert topics == [2000] and {(c["lines"], c["skip_lines"]) for c in calls} == {(2000, 0)}
    assert "unmeasured" not in "\n".join(exact_report(found))


def test_an_env_side_is_a_label_and_its_variables() -> None:
    assert env_side("Java's default JIT:STREAMING_APP_JVM_C1=0") == (
        "Java's default JIT", {"STREAMING_APP_JVM_C1": "0"}
    )  # fmt: skip
    assert env_side("c1:JAVA_TOOL_OPTIONS=-XX:TieredStopAtLevel=1,A_B=") == (
        "c1", {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1", "A_B": ""}
    )  # fmt: skip
    for bad in (
        "STREAMING_APP_JVM_C1=0",
        ":A=1",
        "jit:",
        "jit:A",
        "jit:1A=0",
        "jit:A=1,",
        "x:A=1,A=2",
    ):
        with pytest.raises(argparse.ArgumentTypeError):
            env_side(bad)


@contextlib.contextmanager
def _broker(_workdir: Path) -> Iterator[str]:
    yield "b:1"


def test_the_env_sides_and_the_warm_up_reach_the_exact_runs_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told: dict[str, Any] = {}
    monkeypatch.setattr(compare, "export", lambda rev, into: tmp_path / "code")
    monkeypatch.setattr(compare, "broker", _broker)
    monkeypatch.setattr(
        compare, "exact_throughput", lambda *a, **k: told.update(exact=k) or {"rows": []}
    )
    monkeypatch.setattr(compare, "exact_report", lambda e: [])
    monkeypatch.setattr(compare, "cpu_table", lambda rows: [])
    monkeypatch.setattr(compare, "state_cost", lambda *a, **k: told.update(cost=k) or {})
    monkeypatch.setattr(compare, "million_report", lambda c: [])
    sizes = dict(SMOKE)
    env = {"STREAMING_APP_JVM_C1": "0"}
    compare.compare_exact(
        tmp_path, "abc", ["exact", "million"], sizes, 1, False, 4, (("jit", env),)
    )
    assert told["exact"]["sides"] == (
        ("before (abc)", tmp_path / "code"), ("after", None), ("jit", None, env)
    )  # fmt: skip
    assert told["exact"]["warmup"] == 4
    assert told["cost"]["sides"] == (("before (abc)", tmp_path / "code"), ("after", None))


def _main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str
) -> tuple[int | str | None, str, dict[str, Any]]:
    """compare's main with these arguments: its exit code, its stderr, what it ran."""
    ran: dict[str, Any] = {}
    monkeypatch.setenv(ARCHIVE_ENV, "1")  # main sets it: restored after the test
    monkeypatch.setattr(compare_cli, "compare_exact", lambda *a: ran.update(args=a) or [])
    monkeypatch.setattr(sys, "argv", ["run.py compare", "abc", "--workdir", str(tmp_path), *args])
    code: int | str | None = 0
    try:
        compare_cli.main()
    except SystemExit as exit:
        code = exit.code
    return code, capsys.readouterr().err, ran


def test_the_options_reach_the_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, ran = _main(monkeypatch, capsys, tmp_path, "--exact", "--smoke", "--warmup-batches",
                         "2", "--env-side", "jit:A=0", "--env-side", "both:A=0,B=1")  # fmt: skip
    assert code == 0
    assert ran["args"][-2:] == (2, (("jit", {"A": "0"}), ("both", {"A": "0", "B": "1"})))
    code, _, ran = _main(monkeypatch, capsys, tmp_path, "--exact", "--smoke")
    assert code == 0 and ran["args"][-2:] == (0, ())


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--exact", "--env-side", "no colon"], "--env-side"),
        (["--exact", "--env-side", "after:A=1"], "--env-side"),  # the checkout's side's label
        (["--exact", "--env-side", "x:A=1", "--env-side", "x:B=1"], "--env-side"),
        (["--env-side", "jit:A=0"], "--env-side"),  # not without --exact
        (["--exact", "--warmup-batches", "-1"], "--warmup-batches"),
        (["--exact", "--warmup-batches", "ten"], "--warmup-batches"),
        (["--warmup-batches", "5"], "--warmup-batches"),
    ],
)
def test_a_bad_option_exits_2_with_one_line_naming_it(
    args: list[str],
    option: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err, ran = _main(monkeypatch, capsys, tmp_path, *args)
    assert code == 2 and not ran
    last = err.strip().splitlines()[-1]
    assert last.startswith("run.py compare: error: ") and option in last, err
