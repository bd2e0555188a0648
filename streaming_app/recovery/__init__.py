"""Surviving crashes and upgrades: checkpoint metadata, the guard, snapshots, restoring."""
