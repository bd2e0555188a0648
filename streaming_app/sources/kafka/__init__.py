"""The Kafka source: offsets, their logs, the reader, the client and its SASL and TLS."""
