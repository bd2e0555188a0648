"""The benchmarks' layout: one entry point reaches every benchmark that runs alone."""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run import COMMANDS

BENCH = Path(__file__).resolve().parents[2] / "bench"
# Started by the harness as processes of their own, not by a person.
CHILDREN = {"bench.peers.spark_peer", "bench.peers.quix_job"}


def _modules_with_main() -> set[str]:
    found = set()
    for path in BENCH.rglob("*.py"):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            found.add(".".join(path.relative_to(BENCH.parent).with_suffix("").parts))
    return found


def test_every_benchmark_with_a_main_is_a_command_of_run_py() -> None:
    assert _modules_with_main() == {*COMMANDS.values(), *CHILDREN, "bench.run"}


def test_each_command_names_a_module_with_a_main() -> None:
    for module in COMMANDS.values():
        assert callable(importlib.import_module(module).main), module


def test_a_command_parses_its_own_options_under_run_py() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "small-state", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: run.py small-state ")
    listed = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--help"], capture_output=True, text=True
    )
    assert all(name in listed.stdout for name in COMMANDS)


def test_only_the_entry_point_and_the_children_run_as_scripts() -> None:
    # A module run as a script would need bench/ on its path: only these put it there.
    scripts = {
        ".".join(path.relative_to(BENCH.parent).with_suffix("").parts)
        for path in BENCH.rglob("*.py")
        if '__name__ == "__main__"' in path.read_text()
    }
    assert scripts == {"bench.run", *CHILDREN}


def test_a_benchmark_keeps_its_files_in_the_folder_given_or_in_a_new_one(tmp_path: Path) -> None:
    from bench.harness.results import make_workdir

    given = tmp_path / "a" / "b"
    assert make_workdir(given, "x-") == given and given.is_dir()
    made = [make_workdir(None, "streaming-app-test-") for _ in range(2)]
    try:
        assert all(path.is_dir() and path.name.startswith("streaming-app-test-") for path in made)
        assert made[0] != made[1]  # a run never writes into another's folder
    finally:
        for path in made:
            shutil.rmtree(path)


def _bench_modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(BENCH.parent).with_suffix("").parts)
        for path in BENCH.rglob("*.py")
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_imports_and_answers_help(command: str) -> None:
    # A regrouping that breaks a benchmark's imports fails here, without running it.
    result = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"usage: run.py {command} "), result.stdout[:300]


def test_every_benchmark_module_imports_and_names_only_files_that_exist() -> None:
    # The suite's benchmarks (quix, peer, ...) are imported by run.py, not commands: import
    # each module, and check each file it names by a module-level Path (a child script, the
    # docs page) is there: bench/peers/quix.py once named bench/quix_job.py after a regroup.
    named = {}
    for module in _bench_modules():
        for name, value in vars(importlib.import_module(module)).items():
            if isinstance(value, Path) and value.suffix and name.isupper():
                named[f"{module}.{name}"] = value
    assert "bench.peers.quix.JOB" in named  # the probe finds the file the regroup broke
    assert [key for key, path in named.items() if not path.is_file()] == []


def _started_by_the_harness(child: str) -> Path:
    """The path the harness runs a child script by."""
    if child == "bench.peers.quix_job":
        job: Path = importlib.import_module("bench.peers.quix").JOB
        return job
    return Path(importlib.import_module(child).__file__ or "")  # spark_peer runs itself


@pytest.mark.parametrize("child", sorted(CHILDREN))
def test_every_child_script_answers_help_where_the_harness_starts_it(child: str) -> None:
    result = subprocess.run(
        [sys.executable, str(_started_by_the_harness(child)), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: "), result.stdout[:300]
