"""Against what users would pick instead: Spark's own word count, the other engine, quixstreams."""
