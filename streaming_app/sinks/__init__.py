"""Where the totals go: the console, idempotent files and PostgreSQL, and the per-batch commit."""
