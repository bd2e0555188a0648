"""What the structured engine's state looks like in a checkpoint (no Spark needed).

Shared by the processor that writes it (processor.py), the guard that records it
(guard.py) and the snapshot writer that reads it (snapshot_writer.py). The running totals
are grouped by bucket: each (word, total) lives in the map state `STATE_NAME` of the bucket
its word hashes to, one of `BUCKETS`. A checkpoint's layout is fixed when it is made.
"""

from __future__ import annotations

BUCKET = "bucket"  # the grouping column: pmod(hash(key), BUCKETS)
BUCKETS = 1024
STATE_NAME = "total"  # the map state: word -> total (text)
STATE_LAYOUT = f"map-per-bucket/{BUCKETS}"
