"""The worker daemon's old name, which a `spark.python.daemon.module` may still give.

It moved to `streaming_app.lifecycle.worker_daemon` (both engines use it).
"""

from __future__ import annotations

if __name__ == "__main__":
    import runpy

    runpy.run_module("streaming_app.lifecycle.worker_daemon", run_name="__main__")
