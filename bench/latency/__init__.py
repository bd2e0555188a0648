"""End-to-end latency: probes through the app to a reader of its sinks."""
