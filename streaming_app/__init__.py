"""streaming_app: recoverable PySpark DStream word counts over socket, directory and Kafka input."""

__version__ = "0.5.4"
