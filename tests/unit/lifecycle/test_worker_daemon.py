"""The Python worker daemon both engines fork their workers from on a local master."""

from __future__ import annotations

import os
import subprocess
import sys

from streaming_app.lifecycle.worker_daemon import PRELOADED, STOCK, without_secret


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


def test_the_daemons_workers_hold_no_cluster_secret_where_the_stock_daemons_do() -> None:
    # A real local Spark whose executor environment has Spark's secret, as a standalone
    # worker gives it to its executors: a task reads its worker's environment both ways,
    # under this daemon and then, the probe's positive control, under Spark's own.
    code = (
        "import os\n"
        "os.environ['_SPARK_AUTH_SECRET'] = 'the-cluster-secret-42'\n"
        "from pyspark import SparkConf, SparkContext\n"
        "def look(_):\n"
        "    import os\n"
        "    with open('/proc/self/environ', 'rb') as f:\n"
        "        raw = f.read()\n"
        "    with open(f'/proc/{os.getppid()}/environ', 'rb') as f:\n"
        "        daemon = f.read()\n"
        "    return (os.environ.get('_SPARK_AUTH_SECRET'), b'the-cluster-secret-42' in raw,\n"
        "            b'the-cluster-secret-42' in daemon, 'worker_daemon' in open(\n"
        "            f'/proc/{os.getppid()}/cmdline').read())\n"
        f"for module in {[PRELOADED, STOCK]!r}:\n"
        "    conf = SparkConf().setMaster('local[1]').setAppName('daemon-secret')\n"
        "    conf.set('spark.python.daemon.module', module)\n"
        "    conf.set('spark.ui.enabled', 'false').set('spark.driver.host', '127.0.0.1')\n"
        "    sc = SparkContext(conf=conf)\n"
        "    print(module, sc.parallelize([0, 1], 2).map(look).collect())\n"
        "    sc.stop()\n"
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout.strip().splitlines()[-2:]
    assert printed == [
        f"{PRELOADED} {[(None, False, False, True)] * 2}",
        f"{STOCK} {[('the-cluster-secret-42', True, True, False)] * 2}",
    ]


def test_the_environment_to_start_again_in_drops_the_secret_only() -> None:
    assert without_secret({"PATH": "/bin"}) is None
    assert without_secret({"PATH": "/bin", "_SPARK_AUTH_SECRET": "s"}) == {"PATH": "/bin"}
