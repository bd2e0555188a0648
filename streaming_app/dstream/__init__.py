"""The DStream engine: the context factory, starting or recovering, listening, running, stopping."""
