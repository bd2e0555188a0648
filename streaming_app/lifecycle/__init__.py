"""What both engines share to run: the start-up checks, the worker daemon, the stop of a run."""
