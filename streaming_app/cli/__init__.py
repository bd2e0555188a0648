"""The `streaming-app` command line: one module per command group, one way to fail."""
