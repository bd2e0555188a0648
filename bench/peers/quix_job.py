"""A word count in quixstreams, the Python stream processor users weigh against this app.

    python bench/peers/quix_job.py count --broker HOST:PORT --topic T --group G --state-dir D ...
    python bench/peers/quix_job.py totals --broker HOST:PORT --topic T

Runs in a virtualenv of its own (bench/peers/quix.py makes it): it imports quixstreams and the
standard library, nothing of streaming_app. `count` is the job as quixstreams' own docs
shape a running total per key: the lines split on whitespace into words, the words
re-keyed with `group_by` (quixstreams keeps state per message key, so it sends every word
through a repartition topic), a stateful count per word, and with `--output` each new
total sent to a topic, the way a quixstreams job hands its results on. It stops once no
word came for `--idle` seconds (or none at all in two minutes) and writes what it counted
to `--result` (JSON). `totals` reads such an output topic to its end (committed
transactions only) and prints the last total of each word as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

STARTED = time.time()
GIVE_UP_S = 120.0  # an instance that counted nothing by then stops


def count(args: argparse.Namespace) -> None:
    from quixstreams import Application  # type: ignore[import-not-found]
    from quixstreams.state import State  # type: ignore[import-not-found]

    app = Application(
        broker_address=args.broker,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        processing_guarantee=args.guarantee,
        loglevel="WARNING",
        consumer_extra_config={"session.timeout.ms": args.session_timeout_ms},
    )
    lines = app.topic(args.topic, value_deserializer="bytes", key_deserializer="bytes")
    sdf = app.dataframe(lines)
    sdf = sdf.apply(lambda value: value.decode("utf-8", "replace").split(), expand=True)
    sdf = sdf.group_by(lambda word: word, name="word")
    seen: dict[str, Any] = {"words": 0, "first": None, "last": None}

    def add_one(word: str, state: State) -> dict[str, Any]:
        total = state.get("n", 0) + 1
        state.set("n", total)
        now = time.time()
        if seen["first"] is None:
            seen["first"] = now
        seen["last"] = now
        seen["words"] += 1
        return {"word": word, "n": total}

    sdf = sdf.apply(add_one, stateful=True)
    if args.output:
        out = app.topic(args.output, value_serializer="json", key_serializer="str")
        sdf = sdf.to_topic(out, key=lambda total: total["word"])
    # quixstreams' own run(timeout=...) counts from the last rebalance: two instances joining
    # one after the other could both stop before their first message. Stop instead once a
    # word was counted and none came for `idle` seconds, or none came at all in GIVE_UP_S.
    threading.Thread(target=stop_when_quiet, args=(app, seen, args.idle), daemon=True).start()
    app.run()
    with open(args.result, "w") as result:
        json.dump({**seen, "started": STARTED, "pid": os.getpid()}, result)


def stop_when_quiet(app: Any, seen: dict[str, Any], idle: float) -> None:
    while True:
        time.sleep(0.2)
        last = seen["last"]
        if (last is not None and time.time() - last >= idle) or (
            last is None and time.time() - STARTED >= GIVE_UP_S
        ):
            app.stop()
            return


def totals(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, TopicPartition  # type: ignore[import-not-found]

    consumer = Consumer({
        "bootstrap.servers": args.broker,
        "group.id": f"totals-{os.getpid()}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })  # fmt: skip
    partitions = consumer.list_topics(args.topic, timeout=30).topics[args.topic].partitions
    consumer.assign([TopicPartition(args.topic, p, 0) for p in partitions])
    found: dict[str, int] = {}
    quiet_since = time.monotonic()
    # The first message may take a while (the broker's metadata, the first fetch).
    while time.monotonic() - quiet_since < (args.idle if found else 30.0):
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        quiet_since = time.monotonic()
        found[message.key().decode()] = json.loads(message.value())["n"]
    consumer.close()
    json.dump(found, sys.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    job = verbs.add_parser("count")
    job.add_argument("--broker", required=True)
    job.add_argument("--topic", required=True)
    job.add_argument("--group", required=True)
    job.add_argument("--state-dir", required=True)
    job.add_argument("--guarantee", choices=("at-least-once", "exactly-once"), required=True)
    job.add_argument("--output", help="topic the new totals go to [none]")
    job.add_argument("--idle", type=float, default=10.0, help="stop after this long quiet, s")
    job.add_argument("--result", required=True)
    job.add_argument("--session-timeout-ms", type=int, default=45_000)
    read = verbs.add_parser("totals")
    read.add_argument("--broker", required=True)
    read.add_argument("--topic", required=True)
    read.add_argument("--idle", type=float, default=10.0, help="stop after this long quiet, s")
    args = parser.parse_args()
    {"count": count, "totals": totals}[args.verb](args)


if __name__ == "__main__":
    main()
