"""Controls: patches that each break one promise of docs/guarantees.md (run.py runs them)."""
