"""The state: its size and cost, memory over a long run, recovery after kill -9."""
