"""The Kafka broker (tansu) on a namespace host of its own, and producing to it from a host."""

from __future__ import annotations

import sys
from pathlib import Path

from streaming_app.tools.dev_broker import tansu_binary
from tests.integration.netns import Host

PORT = 9092  # the broker host's own network


def start_broker(host: Host, log: Path) -> str:
    """tansu on `host`, listening on and advertising its address; its bootstrap address."""
    url = f"tcp://{host.address}:{PORT}"
    with open(log, "wb") as out:
        host.popen(
            [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=out, env={"RUST_LOG": "warn"},
        )  # fmt: skip
    return f"{host.address}:{PORT}"


def produce_command(bootstrap: str, topic: str, lines: Path, rate: float) -> list[str]:
    """`streaming-app produce` of a file's lines (each partition's last one alone)."""
    return [
        sys.executable, "-m", "streaming_app", "produce", "--topic", topic,
        "--bootstrap-servers", bootstrap, "--file", str(lines), "--rate", str(rate),
        "--partitions", "2",
    ]  # fmt: skip
