"""The Structured Streaming engine (`--engine structured`), a first slice: docs/structured.md."""
