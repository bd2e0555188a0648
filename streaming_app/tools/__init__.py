"""Operator tools: demo, produce, dev broker, supervise, report, checkpoint inspect/clean/scrub."""
