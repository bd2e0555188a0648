"""What a feature costs: the driver's share of the data, security, the Prometheus endpoint."""
