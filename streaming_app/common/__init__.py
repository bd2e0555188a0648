"""Building blocks below every stage: file systems, batch times, retries, Spark, metrics."""
