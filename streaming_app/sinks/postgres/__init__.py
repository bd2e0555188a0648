"""The PostgreSQL sink: the writer (one transaction per batch) and its output operation."""
