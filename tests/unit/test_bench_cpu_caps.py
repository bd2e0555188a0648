"""The scale-out benchmark's CPU quota for worker hosts (bench/scale/cpu_caps.py), on a
cgroup tree of plain files: the quota written, processes moved in, and out again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bench.scale import cpu_caps
from bench.scale.cpu_caps import PERIOD_US, CpuCaps, controller_root, quota_us


def test_a_share_of_a_core_is_that_share_of_each_period() -> None:
    assert quota_us(0.5) == PERIOD_US // 2
    assert quota_us(1.0) == PERIOD_US
    assert quota_us(0.001) == 1000  # the kernel's least
    with pytest.raises(ValueError, match="above 0"):
        quota_us(0)


def _v1(root: Path) -> Path:
    cpu = root / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("-1")
    (cpu / "cgroup.procs").write_text("")
    return cpu


def test_the_controller_is_v2s_where_it_has_cpu_else_v1s(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory pids")
    with pytest.raises(SystemExit, match="cpu controller"):
        controller_root(tmp_path)
    cpu = _v1(tmp_path)
    assert controller_root(tmp_path) == (cpu, 1)
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory")
    assert controller_root(tmp_path) == (tmp_path, 2)


def test_each_worker_host_gets_its_group_with_the_quota_and_its_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu = _v1(tmp_path)
    in_namespace = {"ns-wa": [101, 102], "ns-wb": [201]}
    monkeypatch.setattr(cpu_caps, "namespace_inodes", lambda names: set(names))
    monkeypatch.setattr(
        cpu_caps, "namespace_pids", lambda ns: [p for n in ns for p in in_namespace[n]]
    )
    moved: dict[Path, list[str]] = {}
    write = Path.write_text

    def record(path: Path, text: str, *args: object, **kwargs: object) -> int:
        if path.name == "cgroup.procs":  # a real procs file takes one pid a write
            moved.setdefault(path.parent, []).append(text)
            text = "\n".join(moved[path.parent]) + "\n"
        return write(path, text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", record)
    with CpuCaps({"wa": "ns-wa", "wb": "ns-wb"}, 0.5, root=tmp_path) as caps:
        wa, wb = caps.groups["wa"], caps.groups["wb"]
        assert wa.parent == cpu and wa.name == f"streaming-app-bench-{os.getpid()}-wa"
        assert (wa / "cpu.cfs_quota_us").read_text() == "50000"
        assert (wb / "cpu.cfs_period_us").read_text() == str(PERIOD_US)
        assert caps.members("wa") == [101, 102] and caps.members("wb") == [201]
        caps.add("wb", 202)  # a plain Python process started on wb
        assert caps.members("wb") == [201, 202]
    # What was left went back to the root group.
    assert moved[cpu] == ["101", "102", "201", "202"]


def test_a_group_that_cannot_be_made_leaves_none_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu = _v1(tmp_path)
    taken = cpu / f"streaming-app-bench-{os.getpid()}-wb"
    taken.write_text("not ours")  # wb's name is taken
    removed: list[str] = []

    def rmdir(path: Path) -> None:  # cgroupfs: a group's files go with it
        removed.append(path.name)
        shutil.rmtree(path)

    monkeypatch.setattr(Path, "rmdir", rmdir)
    with pytest.raises(FileExistsError), CpuCaps({"wa": "a", "wb": "b"}, 0.5, root=tmp_path):
        pass
    assert removed == [f"streaming-app-bench-{os.getpid()}-wa"]
    assert taken.read_text() == "not ours"
