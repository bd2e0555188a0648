"""The settings: their schema and rules, loaded from files, the environment and flags."""
