"""A standalone cluster on hosts of its own: workers and the driver cut off while records arrive.

Five hosts: the master, two workers (wa, wb), the driver (scripts/submit.sh, client mode,
Kafka source, files sink) and the Kafka broker, with a producer on the broker's host
sending a round of lines every few seconds throughout. wb is cut for good (the master
drops it, wa takes over); then wa, the one worker left, is cut while a task runs on it,
and healed; then the driver is cut and healed. Each fault starts once the batches queued
by the one before have run. Every total is exact at the end, the app's output holds no
trace, and nothing is left running on the hosts. The figures printed are the times from
each heal (for wb: from the master dropping it) to the first batch after it whose new
records are in the output.
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from streaming_app.errors import OutputError
from streaming_app.sinks.files_layout import read_totals
from tests.integration.cluster_helpers import SubmittedApp
from tests.integration.cluster_hosts import HostCluster
from tests.integration.cluster_hosts import submit_args as two_workers
from tests.integration.conftest import kafka_args
from tests.integration.harness import (
    SCHEDULING_DELAY,
    EveryPause,
    cli_totals,
    make_text,
    output_without_traces,
    truth,
    wait_for,
    wait_for_totals,
)
from tests.integration.kafka_helpers import fresh_topic
from tests.integration.kafka_host import PORT, produce_command, start_broker
from tests.integration.netns import Host, Network

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]
ROUND_LINES = 20
BATCH_SECONDS = 4
# A progress line's processing time (streaming_app.common.metrics_recorder.progress_line).
PROCESSING = re.compile(r"\bprocessing=(\d+\.\d+)s")
RATE = 10  # lines a second within a round


@dataclass(frozen=True)
class Faults:
    """How long wa and the driver are cut off, and the master's worker timeout (None: 60 s)."""

    worker_cut: float
    driver_cut: float
    worker_timeout: int | None


class Rounds(EveryPause):
    """Rounds of lines produced on the broker's host, one after the other, until stopped."""

    def __init__(self, host: Host, bootstrap: str, topic: str, workdir: Path, seed: int) -> None:
        super().__init__(pause=0.5)
        self.host, self.bootstrap, self.topic, self.workdir = host, bootstrap, topic, workdir
        self.rng = random.Random(seed)
        self.failures: list[str] = []

    def step(self) -> list[str]:
        text = make_text(self.rng, ROUND_LINES)
        path = self.workdir / f"round-{len(self.written) + 1}.txt"
        path.write_text(text, "utf-8")
        done = self.host.run(produce_command(self.bootstrap, self.topic, path, RATE), timeout=120)
        if done.returncode != 0:  # the broker's host is never cut: a fault of the test's
            self.failures.append(done.stderr)
            self.halt.set()
            return []
        return [text]


class Counted(EveryPause):
    """How many words the output's totals count, sampled every quarter of a second."""

    def __init__(self, output_dir: Path) -> None:
        super().__init__(pause=0.25)
        self.output_dir = output_dir
        self.samples: list[tuple[float, int]] = []

    def step(self) -> list[str]:
        try:
            totals = read_totals(str(self.output_dir))[1]
        except OutputError:  # not there yet, or pruned while read again and again
            return []
        self.samples.append((time.monotonic(), sum(totals.values())))
        return []

    def growth_after(self, moment: float) -> float | None:
        """Seconds from `moment` to the first sample counting more than at `moment`."""
        before = [count for at, count in self.samples if at <= moment]
        base = before[-1] if before else 0
        return next(
            (at - moment for at, count in self.samples if at > moment and count > base), None
        )

    def wait_growth_after(self, moment: float, timeout: float = 300) -> float:
        """Wait for new records counted after `moment`; seconds from `moment` to them."""
        return wait_for(
            "new records counted", partial(self.growth_after, moment), timeout, pause=0.25
        )


def progress(app: SubmittedApp) -> list[str]:
    """The progress lines (one a completed batch) the app has logged so far, in order."""
    return [line for line in app.log().splitlines() if " scheduling_delay=" in line]


def progress_lines(app: SubmittedApp) -> int:
    """How many progress lines the app has logged so far."""
    return len(progress(app))


def seconds(pattern: re.Pattern[str], line: str) -> float:
    """A progress line's figure in seconds; 0 where Spark did not know it ("?")."""
    found = pattern.search(line)
    return float(found.group(1)) if found else 0.0


def wait_caught_up(app: SubmittedApp, seen: int, timeout: float = 240) -> None:
    """Wait until three progress lines after the first `seen` show no scheduling delay.

    The batches queued during an outage complete one after the other once it is over;
    the next fault starts when they have, so that it finds the app in its steady state.
    """

    def caught_up() -> bool:
        delays = [seconds(SCHEDULING_DELAY, line) for line in progress(app)[seen:]]
        return len(delays) >= 3 and max(delays[-3:]) < 1

    wait_for("caught up", caught_up, timeout, pause=0.5)


def pids_on(host: Host) -> list[str]:
    """The processes running on a host now."""
    listed = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True, text=True)
    return listed.stdout.split()


@dataclass
class Scene:
    """The hosts, the cluster, the app on the driver's host, and what the test measures."""

    network: Network
    hosts: dict[str, Host]
    cluster: HostCluster
    app: SubmittedApp
    rounds: Rounds
    counted: Counted
    figures: dict[str, float | str] = field(default_factory=dict)
    lines: int = 0  # progress lines logged before the last fault's recovery

    def event(self, name: str) -> float:
        """Note the wall-clock time of an event (to find it in the logs); now, monotonic."""
        self.figures[name] = time.strftime("%H:%M:%S")
        return time.monotonic()

    def steady(self) -> None:
        """Wait until the batches queued by the last fault have run."""
        wait_caught_up(self.app, self.lines)

    def cut_and_heal(self, name: str, seconds: float) -> tuple[float, float]:
        """Cut a host off for `seconds`, then heal it; when it was cut and healed."""
        cut = self.event(f"{name} cut")
        self.network.cut(self.hosts[name])
        time.sleep(seconds)
        self.network.heal(self.hosts[name])
        return cut, self.event(f"{name} healed")

    def recovered(self, figure: str, since: float) -> None:
        """Wait for new records in the output after `since`; note how long that took."""
        self.figures[figure] = self.counted.wait_growth_after(since)
        self.lines = progress_lines(self.app)

    def print_figures(self) -> None:
        for name, value in self.figures.items():
            print(f"{name}: {value if isinstance(value, str) else f'{value:.1f} s'}")


def start_scene(
    network: Network, dirs: dict[str, Path], tmp_path: Path, worker_timeout: int | None
) -> Scene:
    """Five hosts, a broker and a cluster on them, a first round sent, the app submitted."""
    names = ("master", "wa", "wb", "driver", "broker")
    hosts = {name: network.add_host(name) for name in names}
    bootstrap = start_broker(hosts["broker"], tmp_path / "tansu.log")
    opts = f"-Dspark.worker.timeout={worker_timeout}" if worker_timeout else ""
    cluster = HostCluster(tmp_path / "cluster", hosts["master"], [hosts["wa"], hosts["wb"]], opts)
    cluster.start()
    hosts["driver"].wait_for_port(hosts["broker"].address, PORT)
    rounds = Rounds(hosts["broker"], bootstrap, fresh_topic("cluster"), tmp_path, 30)
    rounds.written += rounds.step()  # the topic and a first round, before the app starts
    assert not rounds.failures, rounds.failures
    submit_args = two_workers(cluster, hosts["driver"])
    # Every host shares this machine's file system, as a cluster's nodes share a mount.
    run_args = kafka_args(
        dirs, bootstrap, rounds.topic, "--allow-local-checkpoint", "--stop-timeout", "120",
        # Seven JVMs share two cores here: with 4 s batches the app catches up on what
        # queued during an outage within a minute, also beside other tests.
        "--batch-interval", str(BATCH_SECONDS), "--checkpoint-interval", str(2 * BATCH_SECONDS),
        "--snapshot-interval", str(5 * BATCH_SECONDS),
    )  # fmt: skip
    app = SubmittedApp(submit_args, run_args, tmp_path, "submit", on=hosts["driver"])
    return Scene(network, hosts, cluster, app, rounds, Counted(dirs["output"]))


@pytest.mark.parametrize(
    "faults",
    [
        # As issue 30 reports it: wa cut for as long as the master's worker timeout (60 s).
        pytest.param(
            Faults(60, 30, None),
            id="as-reported",
            marks=[pytest.mark.slow, pytest.mark.timeout(900)],
        ),
        # For CI: wa cut for less than the worker timeout, which is shortened so that the
        # master drops wb sooner.
        # `slow` since CI of 5036512 (321 s there); CI cuts a worker off in
        # test_cluster_worker_cut.py (and the links to Kafka and PostgreSQL in
        # test_kafka_partition.py and test_postgres_partition.py).
        pytest.param(Faults(15, 15, 30), id="short", marks=pytest.mark.slow),
    ],
)
def test_workers_and_the_driver_cut_off_while_records_arrive(
    network: Network, dirs: dict[str, Path], tmp_path: Path, faults: Faults
) -> None:
    scene = start_scene(network, dirs, tmp_path, faults.worker_timeout)
    app, cluster, hosts = scene.app, scene.cluster, scene.hosts
    try:
        with cluster.logs_on_failure():
            app.wait_for_log(r"Started new streaming context", timeout=180)
            wait_for_totals(dirs["output"], truth(scene.rounds.written), app, timeout=180)
            scene.rounds.start()
            scene.counted.start()
            for name in cluster.workers:
                wait_for(f"a task on {name}", partial(cluster.ran_a_task, name), 120, pause=0.5)

            # 1. wb cut for good: the master drops it, and wa takes over its work.
            scene.steady()
            cut = scene.event("wb cut")
            network.cut(hosts["wb"])
            wait_for(
                "wb dropped",
                lambda: hosts["wb"].address not in cluster.alive_workers(),
                300,
                pause=0.5,
            )
            dropped = time.monotonic()
            scene.figures["wb: cut -> dropped by the master"] = dropped - cut
            scene.recovered("wb: dropped -> new records", dropped)

            # 2. wa, the one worker left, cut while a task runs on it, then healed.
            scene.steady()
            wait_for("a task running on wa", partial(cluster.running_tasks, "wa"), 120, pause=0.02)
            before = progress_lines(app)
            cut, healed = scene.cut_and_heal("wa", faults.worker_cut)
            early = scene.counted.growth_after(cut)
            if early is not None and early < healed - cut:
                scene.figures["wa: cut -> new records (before the heal)"] = early
            scene.recovered("wa: heal -> new records", healed)
            # The batch in flight (or the next one, had it just ended) waited out the cut.
            # Its output can be read before Spark's listener has logged its progress line.
            wait_for(
                "a progress line after the cut", lambda: progress_lines(app) > before, 60, pause=0.5
            )
            longest = max(seconds(PROCESSING, line) for line in progress(app)[before:])
            assert longest >= faults.worker_cut - BATCH_SECONDS, longest

            # 3. The driver cut, then healed.
            scene.steady()
            cut, healed = scene.cut_and_heal("driver", faults.driver_cut)
            scene.recovered("driver: heal -> new records", healed)

            written = scene.rounds.stop()
            assert not scene.rounds.failures, scene.rounds.failures
            wait_for_totals(dirs["output"], truth(written), app, timeout=300)
            scene.steady()
            assert app.terminate(timeout=200) == 0, app.log()[-4000:]
            assert cli_totals(tmp_path, dirs["output"], "totals") == truth(written)
            output = output_without_traces(app)
    finally:
        scene.rounds.halt.set()
        scene.counted.halt.set()
        app.stop_if_running()
        scene.print_figures()
    # What the operator sees of wb's loss: Spark's one line (and the lost blocks' lines).
    lost = rf"ERROR TaskSchedulerImpl: Lost executor \d+ on {re.escape(hosts['wb'].address)}: "
    assert re.search(lost + "worker lost", output), output[-4000:]
    cluster.stop()
    left = {name: pids_on(host) for name, host in hosts.items() if name != "broker"}
    assert not any(left.values()), left
