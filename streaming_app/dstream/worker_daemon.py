"""The worker daemon's name before it moved to `streaming_app.lifecycle.worker_daemon`
(both engines use it): a `spark.python.daemon.module` that names this still works."""

from __future__ import annotations

if __name__ == "__main__":
    import runpy

    runpy.run_module("streaming_app.lifecycle.worker_daemon", run_name="__main__")
