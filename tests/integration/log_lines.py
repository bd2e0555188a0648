"""The app's log lines that the integration tests wait for and count (regular expressions)."""

CONTEXT_STARTED = r"Started new streaming context"
CONTEXT_RECOVERED = r"Recovered streaming context from checkpoint"
QUERY_STARTED = r"Started new query id=\S+ on checkpoint"
QUERY_RECOVERED = r"Recovered query id=\S+ from checkpoint .*: micro-batches up to \S+ committed"
# By engine: the DStream engine's streaming context, the structured engine's query.
STARTED = {"dstream": CONTEXT_STARTED, "structured": QUERY_STARTED}
RECOVERED = {"dstream": CONTEXT_RECOVERED, "structured": QUERY_RECOVERED}
# A structured micro-batch's line, once its sinks wrote it (group 1: its batch id).
WRITTEN = r"batch_id=(\d+) batch_time_ms=\d+: \d+ totals changed"
