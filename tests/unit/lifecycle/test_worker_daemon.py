"""The Python worker daemon both engines fork their workers from on a local master."""

from __future__ import annotations

import subprocess
import sys


def in_new_python(code: str) -> str:
    """What `code` prints, run in a Python of its own (a freeze must not touch pytest's)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_preloaded_daemon_imports_no_thread_before_it_forks() -> None:
    # A thread in the daemon would be missing from every fork, with whatever lock it held.
    code = (
        "from streaming_app.lifecycle.worker_daemon import preload, threads\n"
        "import gc, sys\n"
        "preload()\n"
        "print(threads(), gc.get_freeze_count() > 0, 'pyspark.worker' in sys.modules)"
    )
    assert in_new_python(code) == "1 True True"


def test_a_worker_freezes_what_it_imported_once() -> None:
    code = (
        "from streaming_app.lifecycle.worker_daemon import freeze_once\n"
        "import gc\n"
        "freeze_once()\n"
        "first = gc.get_freeze_count()\n"
        "import pyarrow\n"
        "freeze_once()\n"
        "print(first > 0, gc.get_freeze_count() <= first)"  # frozen objects may still be freed
    )
    assert in_new_python(code) == "True True"


def test_the_old_name_of_the_daemon_still_starts_it() -> None:
    # docs before the move told cluster users to name streaming_app.dstream.worker_daemon.
    code = (
        "import gc, runpy\n"
        "import pyspark.daemon\n"
        "called = []\n"
        "pyspark.daemon.manager = lambda: called.append('manager')\n"
        "runpy.run_module('streaming_app.dstream.worker_daemon', run_name='__main__')\n"
        "print(called, gc.get_freeze_count() > 0)"
    )
    assert in_new_python(code) == "['manager'] True"
