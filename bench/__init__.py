"""The benchmarks of streaming_app, grouped by what they measure, on one harness.

    python bench/run.py [--smoke] [--only NAME,...] [--update-docs]   the suite
    python bench/run.py COMMAND [--help]                                one benchmark alone

harness/     what every benchmark runs on: a broker and a corpus, the app as a subprocess,
             its processes' CPU and memory, rates over steady batches, side-by-side runs,
             results.json and docs/benchmarks.md
throughput/  words/s: the exact configuration, per optimization, checkpoint cost, in-process
             micro-benchmarks, a profile
state/       the state: its size, its cost, memory over a long run, recovery after kill -9
peers/       against what users would pick instead: Spark's own word count, the second
             engine, quixstreams
costs/       what a feature costs: the driver's share, security, the Prometheus endpoint

A group imports the harness and the groups listed above it here, never one below it, and
peers and costs not each other (lint-imports checks it); run.py and compare.py, on top,
import any.
"""
