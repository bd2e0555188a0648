"""Whether the checkpoint directory takes a write now: told when a run fails, with what to do.

Driver side, once, after the stream failed. Both engines keep logs of their own in the
checkpoint directory (the Kafka offsets and the files read, Spark's offsets and commits,
the state), so a full disk or a permission taken away ends the run at the next batch,
in whichever write came first, with Java's bare `IOException: No space left on device`,
which does not say where. `unwritable` writes a small file there and removes it: when
that fails too, the run's error names the checkpoint directory and the reason, and the
failure counts as a failed checkpoint on the Prometheus endpoint.
"""

from __future__ import annotations

import contextlib
import os
import uuid

from streaming_app.common.failure_text import java_summary
from streaming_app.common.fs import join
from streaming_app.recovery.guard import filesystem_for

# Spark's checkpoint listings match `checkpoint-<ms>` in a name; this matches nothing of
# theirs, and is removed at once.
PROBE_PREFIX = ".streaming-app-probe-"
PROBE_BYTES = 4096  # a page: a full tmpfs refuses even one byte, a full disk one block


def unwritable(directory: str) -> str | None:
    """Why `directory` cannot be written now (one line), None if a small file can."""
    fs = filesystem_for(directory)
    path = join(directory, f"{PROBE_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        fs.write_atomic(path, b"\0" * PROBE_BYTES)
    except Exception as exc:  # OSError here, a Java IOException through Hadoop
        return exc.strerror if isinstance(exc, OSError) and exc.strerror else java_summary(exc)
    finally:
        # Nothing was written, or the probe goes now.
        with contextlib.suppress(Exception):
            fs.delete(path)
    return None
