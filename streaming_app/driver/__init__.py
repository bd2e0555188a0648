"""The DStream driver: the context factory, starting or recovering, listening, running, stopping."""
