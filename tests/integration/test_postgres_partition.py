"""PostgreSQL on a host of its own, cut off from the app's host: in-doubt commits and outages.

The app (DStream engine, files source, postgres sink) runs on one namespace host, the
server on another; the test reads the database over the server's Unix socket, which no
cut reaches. A COMMIT is held in flight deterministically: with
`synchronous_standby_names = '*'` and no standby, the server writes the commit and then
waits for a standby's ack that never comes; other sessions do not see it yet. The link is
cut while it waits, so the app cannot know whether the batch committed; the setting is
then cleared (the server finishes the commit) and the link healed. A COMMIT that never
commits is held before the server writes it: a deferred constraint trigger on the progress
table, which runs inside the COMMIT, waits for an advisory lock the test holds; the server
then ends the app's session while the link is cut, which rolls the batch back.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

from streaming_app.sinks.postgres.writer import read_progress
from streaming_app.tools.processes import kill_group
from tests.integration.conftest import files_args
from tests.integration.harness import (
    App,
    drop_file,
    drop_file_for_next_batch,
    make_text,
    output_without_traces,
    truth,
    wait_for,
)
from tests.integration.netns import Host, Network
from tests.integration.pg_helpers import postgres_config, wait_for_pg_totals
from tests.integration.pg_host import PgHost, pg_on

pytestmark = pytest.mark.timeout(240)
TABLE = "wc"
# A lost link is noticed in seconds instead of the sink's default minute: libpq's own
# options, which a DSN may set (writer.py's _CONNECT_DEFAULTS).
FAST_FAILURE = {
    "keepalives_idle": "2",
    "keepalives_interval": "1",
    "keepalives_count": "2",
    "tcp_user_timeout": "4000",
}


def app_args(
    dirs: dict[str, Path], tmp_path: Path, server: PgHost, dsn_options: dict[str, str]
) -> list[str]:
    """A files-source run writing to the server over the network; the DSN in a config file."""
    config = postgres_config(tmp_path, server.dsn(**dsn_options))
    return files_args(
        dirs, "--sink", "postgres", "--postgres-table", TABLE, "--config", str(config)
    )  # fmt: skip


def progress_ms(server: PgHost) -> int:
    """The batch time of the last batch committed (and visible), 0 before the first."""
    row = read_progress(server.local_dsn, TABLE)
    return 0 if row is None else int(row["batch_ms"])


def progress_reached(server: PgHost, batch_ms: int) -> bool:
    """Whether the batch at `batch_ms` (or a later one) has committed."""
    return progress_ms(server) >= batch_ms


def app_waits(server: PgHost, condition: str) -> bool:
    """Whether a session of the app waits as `condition` (on pg_stat_activity) says."""
    with psycopg.connect(server.local_dsn, autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'streaming-app'"
        row = conn.execute(f"{query} AND {condition}").fetchone()
        return bool(row and row[0])


# The app's COMMIT waits for a standby's ack, or in the trigger for the test's advisory
# lock; the app's next attempt waits for the progress row's lock.
SYNC_REP = "wait_event = 'SyncRep'"
ADVISORY = "wait_event = 'advisory'"
LOCK = "wait_event_type = 'Lock'"


class StandbyHold:
    """Holds the app's COMMITs after the server has written them: it waits for a standby."""

    waiting = SYNC_REP

    def __init__(self, server: PgHost) -> None:
        self.server = server

    def hold(self) -> None:
        self.server.set_config("synchronous_standby_names", "*")

    def release(self) -> None:
        self.server.set_config("synchronous_standby_names", None)


HOLD_KEY = 30
HOLD_IN_COMMIT = f"""
CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_lock_shared({HOLD_KEY});
  PERFORM pg_advisory_unlock_shared({HOLD_KEY});
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT OR UPDATE ON {TABLE}_progress
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_commit();
"""


class TriggerHold:
    """Holds the app's COMMITs before the server has written them: the progress table's
    deferred trigger, which runs inside each COMMIT, waits while the test holds its lock."""

    waiting = ADVISORY

    def __init__(self, server: PgHost) -> None:
        self.conn = psycopg.connect(server.local_dsn, autocommit=True)
        self.conn.execute(HOLD_IN_COMMIT)

    def hold(self) -> None:
        self.conn.execute("SELECT pg_advisory_lock(%s)", [HOLD_KEY])

    def release(self) -> None:
        self.conn.execute("SELECT pg_advisory_unlock(%s)", [HOLD_KEY])

    def close(self) -> None:
        self.conn.close()


def in_doubt_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "broke during its COMMIT" in line]


class Input:
    """Texts dropped into the input directory, and the totals they make."""

    def __init__(self, input_dir: Path, seed: int) -> None:
        self.dir = input_dir
        self.rng = random.Random(seed)
        self.texts: list[str] = []

    def add(self, name: str) -> None:
        self.texts.append(make_text(self.rng, 30))
        drop_file(self.dir, name, self.texts[-1].encode())

    def add_for_next_batch(self, name: str) -> int:
        """Add a file that a known batch reads; that batch's time."""
        self.texts.append(make_text(self.rng, 30))
        return drop_file_for_next_batch(self.dir, name, self.texts[-1].encode(), 1000)


@dataclass
class Scene:
    """The app's host, the database's host with its server, and what a test starts."""

    network: Network
    app_host: Host
    db_host: Host
    server: PgHost
    dirs: dict[str, Path]
    tmp_path: Path
    start_app: Any
    app: App = field(init=False)

    def start(
        self,
        seed: int,
        *before: str,
        command: str = "run",
        dsn_options: dict[str, str] = FAST_FAILURE,
        **env: str,
    ) -> Input:
        """Start the app (`before` its run options: supervise's), count a first file."""
        self.app = self.start_app(
            *before,
            *app_args(self.dirs, self.tmp_path, self.server, dsn_options),
            on=self.app_host,
            command=command,
            env=env,
        )
        self.app.wait_for_log(r"Started new streaming context")
        words = Input(self.dirs["input"], seed)
        words.add("1.txt")
        wait_for_pg_totals(self.server.local_dsn, TABLE, truth(words.texts))
        return words

    def heal(self, words: Input, then: str | None = None) -> float:
        """Heal the db's link, add file `then`; seconds until every total is in the table."""
        self.network.heal(self.db_host)
        healed = time.monotonic()
        if then is not None:
            words.add(then)
        wait_for_pg_totals(self.server.local_dsn, TABLE, truth(words.texts), timeout=150)
        return time.monotonic() - healed


@pytest.fixture
def scene(
    network: Network, dirs: dict[str, Path], tmp_path: Path, start_app: Any
) -> Iterator[Scene]:
    """Two hosts, app and db, and a server started on db."""
    app_host, db_host = network.add_host("app"), network.add_host("db")
    with pg_on(db_host) as server:
        yield Scene(network, app_host, db_host, server, dirs, tmp_path, start_app)


def hold_the_commit_of_a_file(
    server: PgHost, words: Input, hold: StandbyHold | TriggerHold, tries: int = 3
) -> int:
    """Add a file and hold its batch's COMMIT in flight; that batch's time.

    Once the batch before it has committed, every commit is held from then on. On a busy
    machine the file's batch may commit before the hold takes effect: then the hold is
    lifted and the next try takes another file.
    """
    for attempt in range(tries):
        batch = words.add_for_next_batch(f"2-{attempt}.txt")
        reached = partial(progress_reached, server, batch - 1000)
        wait_for("commit of the batch before", reached, pause=0.05)
        hold.hold()
        wait_for("a COMMIT held", lambda: app_waits(server, hold.waiting), 30, pause=0.05)
        if progress_ms(server) == batch - 1000:
            return batch
        hold.release()
    raise AssertionError(f"every one of {tries} files was committed before the hold")


def assert_in_doubt_line(output: str, batch: int, server: str, outcome: str) -> None:
    """Assert the output has the one in-doubt warning, naming the batch, server and outcome."""
    lines = in_doubt_lines(output)
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        f"batch_time_ms={batch}: the connection to PostgreSQL at {server}:5432 "
        f"(table {TABLE}) broke during its COMMIT; the progress row shows {outcome}"
    ), lines


@pytest.mark.parametrize("heal_first", [False, True], ids=["commit-then-heal", "heal-then-commit"])
def test_a_cut_during_commit_is_decided_from_the_progress_row(
    scene: Scene, heal_first: bool
) -> None:
    network, db_host, server = scene.network, scene.db_host, scene.server
    words = scene.start(30)
    app = scene.app

    hold = StandbyHold(server)
    batch = hold_the_commit_of_a_file(server, words, hold)
    network.cut(db_host)
    cut = time.monotonic()
    app.wait_for_log(r"PostgreSQL at [^ ]+ \(table wc\) failed \(attempt 1\)", 60)
    time.sleep(max(0.0, cut + 10 - time.monotonic()))  # a cut of 10 s
    if heal_first:  # the retry reads the progress row under its lock: after the COMMIT ends
        network.heal(db_host)
        wait_for(
            "the retry waiting for the row's lock", lambda: app_waits(server, LOCK), pause=0.05
        )
        assert progress_ms(server) == batch - 1000
    hold.release()  # the server finishes the commit
    wait_for("the held commit", lambda: progress_ms(server) >= batch, timeout=30, pause=0.05)
    recovery = scene.heal(words, then="3.txt")
    assert app.terminate() == 0
    output = output_without_traces(app)
    assert_in_doubt_line(output, batch, db_host.address, "it committed: not rewritten")
    if not heal_first:
        print(f"recovery (heal -> 3.txt's totals written): {recovery:.1f} s")


def test_a_cut_during_a_commit_that_never_commits_is_written_again(scene: Scene) -> None:
    """The COMMIT reached the server, which was still running its deferred trigger when the
    link was cut; the server then ends the session (as its keepalives would), so the batch
    rolls back. The app's retry finds the progress row at the batch before, and writes it."""
    network, db_host, server = scene.network, scene.db_host, scene.server
    words = scene.start(33)
    app = scene.app
    hold = TriggerHold(server)
    try:
        batch = hold_the_commit_of_a_file(server, words, hold)
        network.cut(db_host)
        cut = time.monotonic()
        app.wait_for_log(r"PostgreSQL at [^ ]+ \(table wc\) failed \(attempt 1\)", 60)
        with psycopg.connect(server.local_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                f" WHERE application_name = 'streaming-app' AND {ADVISORY}"
            )
        wait_for("the held session to end", lambda: not app_waits(server, ADVISORY), 30, pause=0.05)
        hold.release()
        assert progress_ms(server) == batch - 1000  # rolled back
        time.sleep(max(0.0, cut + 10 - time.monotonic()))  # a cut of 10 s
        recovery = scene.heal(words, then="3.txt")
    finally:
        hold.close()
    assert app.terminate() == 0
    output = output_without_traces(app)
    assert_in_doubt_line(output, batch, db_host.address, "it was not committed: written now")
    print(f"recovery (heal -> 3.txt's totals written): {recovery:.1f} s")


@pytest.mark.parametrize(
    ("dsn_options", "notice"),
    [
        pytest.param(FAST_FAILURE, (3, 15), id="short-timeouts"),
        # What docs/operations.md says: about 60 s with the sink's own defaults, up to
        # about 80 s when the cut also fails the app host's ARP entry, as it does here.
        pytest.param({}, (50, 90), id="sink-defaults", marks=pytest.mark.slow),
    ],
)
def test_a_cut_between_commits_is_retried_and_exact(
    scene: Scene, dsn_options: dict[str, str], notice: tuple[float, float]
) -> None:
    network, db_host, server = scene.network, scene.db_host, scene.server
    words = scene.start(31, dsn_options=dsn_options)
    app = scene.app
    committed = progress_ms(server)
    wait_for("the next commit", lambda: progress_ms(server) > committed, pause=0.05)
    network.cut(db_host)  # just after a commit: the next batch finds the link gone
    cut = time.monotonic()
    words.add("2.txt")
    app.wait_for_log(r"PostgreSQL at [^ ]+ \(table wc\) failed \(attempt 1\)", 120)
    noticed = time.monotonic() - cut
    assert notice[0] <= noticed <= notice[1], noticed
    time.sleep(6)  # then healed: a cut of noticed + 6 s
    recovery = scene.heal(words)
    assert app.terminate() == 0
    output = output_without_traces(app)
    assert in_doubt_lines(output) == []
    assert re.search(r"PostgreSQL at [^ ]+ \(table wc\) succeeded after", output)
    print(f"noticed after {noticed:.1f} s; recovery (heal -> 2.txt's totals): {recovery:.1f} s")


def test_an_outage_longer_than_the_app_waits_ends_the_run_and_supervise_resumes_it(
    scene: Scene,
) -> None:
    network, db_host = scene.network, scene.db_host
    supervised = ["--backoff", "0.5", "--max-failures", "10", "--"]
    words = scene.start(
        32, *supervised, command="supervise", STREAMING_APP_POSTGRES_GIVE_UP_AFTER="8"
    )
    supervisor = scene.app
    network.cut(db_host)
    cut = time.monotonic()
    words.add("2.txt")
    supervisor.wait_for_log(r"driver crashed \(exit code 1\); restarting", 90)
    output = supervisor.log() + supervisor.out_path.read_text("utf-8")
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output[-4000:]
    # One line: the peer, its address, how long it was unreachable, the setting to change.
    # Which step of a batch the cut meets says the first words (postgres/session.py, writer.py).
    error = re.fullmatch(
        r"Error: (reading progress from|writing batch_time_ms=\d+ to"
        r"|staging batch_time_ms=\d+ in) PostgreSQL at "
        rf"{re.escape(db_host.address)}:5432 \(table {TABLE}\): unreachable for (\d+) s "
        r"\(\d+ attempts?(, the last)?: .*\); gave up \(postgres_give_up_after = 8 s\); "
        r"a restart resumes from the checkpoint",
        errors[0],
    )
    assert error is not None and int(error[2]) >= 8, errors
    time.sleep(max(0.0, cut + 30 - time.monotonic()))  # a cut of 30 s
    recovery = scene.heal(words, then="3.txt")
    assert supervisor.terminate() == 0
    output_without_traces(supervisor)
    print(f"recovery (heal -> 3.txt's totals written): {recovery:.1f} s")


# The sink's writer with a plan that stops inside the transaction: the progress row locked,
# all it sent answered, the connection idle. Says "locked" when there.
HOLD_THE_ROW = """
import sys, time
from streaming_app.sinks.postgres.writer import PostgresWriter
def plan(previous):
    print("locked", flush=True)
    time.sleep(600)
PostgresWriter(sys.argv[1], sys.argv[2]).write_batch(1000, [("a", 1)], plan=plan)
"""


def test_a_session_whose_client_vanished_mid_transaction_ends_soon_after_the_heal(
    scene: Scene,
) -> None:
    """A batch's next attempt waits for the progress row's lock. The session of an attempt
    whose client vanished while the server waited for its next statement (a COMMIT lost on
    the way) holds that lock until the server notices: by its TCP keepalive, two hours by
    default, unless the sink asks for the DSN's keepalives on the server's side too."""
    network, app_host, db_host, server = scene.network, scene.app_host, scene.db_host, scene.server
    args = [sys.executable, "-c", HOLD_THE_ROW, server.dsn(**FAST_FAILURE), TABLE]
    holder = app_host.popen(args, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    assert app_waits(server, "state = 'idle in transaction'")
    # Once the client has acknowledged the server's last answer (a delayed ACK), the server
    # has nothing left to resend: after the heal, nothing would tell it the client is gone.
    time.sleep(1)
    network.cut(db_host)
    time.sleep(8)  # the client's keepalives give the connection up; its reset is lost
    kill_group(holder)  # the attempt, gone: nothing more reaches the server from it
    network.heal(db_host)
    healed = time.monotonic()
    wait_for("the server to end the session", lambda: not app_waits(server, "true"), 30, pause=0.05)
    print(f"the vanished client's session ended {time.monotonic() - healed:.1f} s after heal")
