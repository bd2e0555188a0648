"""Where lines come from: a socket (demos), a watched directory and Kafka, with positions."""
