"""What both engines share to run: the start-up checks and the stop of a run."""
