"""The Kafka source: offset planning, the offset and commit logs, the reader and the client."""
