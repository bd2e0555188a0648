"""Operator tools: demo, produce, dev brokers, supervise, report, checkpoint inspect/clean/scrub."""
