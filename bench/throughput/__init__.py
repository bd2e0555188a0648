"""Throughput: the words/s the app sustains, in the exact configuration and per optimization."""
