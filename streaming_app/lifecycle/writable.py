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
from streaming_app.common.path_fs import filesystem_for

# Spark's checkpoint listings match `checkpoint-<ms>` in a name; this matches nothing of
# theirs, and is removed at once.
PROBE_PREFIX = ".streaming-app-probe-"
PROBE_BYTES = 4096  # a page: a full tmpfs refuses even one byte, a full disk one block


def unwritable(directory: str) -> str | None:
    """Why `directory` cannot be written now (one line); None if a small file can, or if
    the question cannot be put (the JVM of a Hadoop file system gone)."""
    path = join(directory, f"{PROBE_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        fs = filesystem_for(directory)
        fs.write_atomic(path, b"\0" * PROBE_BYTES)
    except Exception as exc:
        return _reason(exc)
    # Written: the probe goes at once (its failure to go is no answer either).
    with contextlib.suppress(Exception):
        fs.delete(path)
    return None


def _reason(exc: Exception) -> str | None:
    """What a failed probe says of the directory: a local file system's error, or Hadoop's
    through the JVM; None for a JVM that is gone or did not answer (Py4J's network
    errors), which says nothing of the directory."""
    if getattr(exc, "java_exception", None) is not None:
        return java_summary(exc)
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        return exc.strerror or str(exc)
    return None
