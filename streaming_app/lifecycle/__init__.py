"""What both engines share to run: checks, the secret, metrics, worker daemon, stop."""
