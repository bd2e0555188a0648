"""The PostgreSQL test servers' directories that a killed test run leaves in /tmp: which are
stale, and their removal (nothing started, no server needed)."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest

from tests.integration import pg_host

DEAD, ALIVE, SERVER = 111, 222, 333
HOUR = pg_host.UNNAMED_GRACE_SECONDS


def server_dir(parent: Path, name: str, server: int | None = None, age: float = 0) -> Path:
    """A server directory as PgHost makes it; `server`: the pid its postmaster.pid holds."""
    path = parent / name
    (path / "data").mkdir(parents=True)
    if server is not None:
        (path / "data" / "postmaster.pid").write_text(f"{server}\n/tmp/x\n")
    stamp = 10 * HOUR - age
    os.utime(path, (stamp, stamp))
    return path


def test_only_the_directories_of_dead_test_runs_without_a_running_server_are_stale(
    tmp_path: Path,
) -> None:
    me = os.getpid()
    stale = [
        server_dir(tmp_path, f"sa-pg-{DEAD}-a1b2c3d4"),  # its run was killed
        server_dir(tmp_path, f"sa-pg-{DEAD}-e5f6g7h8", server=DEAD + 1),  # its server too
        server_dir(tmp_path, "sa-pg-oldrun12", age=2 * HOUR),  # made before pids were in names
    ]
    kept = [
        server_dir(tmp_path, f"sa-pg-{ALIVE}-i9j0k1l2"),  # its test process still runs
        server_dir(tmp_path, f"sa-pg-{me}-m3n4o5p6"),  # this process's own
        server_dir(tmp_path, f"sa-pg-{DEAD}-q7r8s9t0", server=SERVER),  # a server still runs
        server_dir(tmp_path, "sa-pg-newrun34", age=60),  # maybe another checkout's, starting
        server_dir(tmp_path, "sa-pg-oldrun56", server=SERVER, age=2 * HOUR),
    ]
    (tmp_path / f"sa-pg-{DEAD}-file").write_text("not a directory")
    (tmp_path / "other").mkdir()

    found = pg_host.stale_server_dirs(tmp_path, lambda pid: pid in (ALIVE, SERVER), now=10 * HOUR)
    assert found == sorted(stale)
    assert all(path.exists() for path in kept)


def test_the_stale_ones_are_removed_and_the_rest_left(tmp_path: Path) -> None:
    gone = server_dir(tmp_path, "sa-pg-999999999-a1b2c3d4")  # no such pid
    (gone / "data" / "base").mkdir()
    mine = server_dir(tmp_path, f"sa-pg-{os.getpid()}-e5f6g7h8")
    assert pg_host.remove_stale_server_dirs(tmp_path) == [gone]
    assert not gone.exists() and mine.exists()


def test_a_server_directory_is_named_for_the_process_that_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_host.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(pg_host.shutil, "chown", lambda *args: None)
    server = pg_host.PgHost(mock.MagicMock(name="Host"), Path("/usr/lib/postgresql/17/bin"))
    assert server.dir.parent == tmp_path
    assert server.dir.name.startswith(f"sa-pg-{os.getpid()}-")
    # Stale once this process is gone, not before.
    assert pg_host.stale_server_dirs(tmp_path, lambda pid: False) == []
    assert pg_host._owner(server.dir.name) == os.getpid()
