"""Readers of a sink, polled: which probe words a user reading it would see now.

- files (the app's): the totals `streaming-app totals` prints, computed in this process by
  the same library function (`sinks.files_layout.read_totals`: the newest complete base
  and the deltas chained after it) instead of spawning the CLI each poll. The output only
  changes by a directory renamed into place, so the totals are read again only when the
  directory's listing changed (the poll at which it changed is the moment seen), and a
  directory's parsed lines are kept while it is in the chain (by path and mtime: complete
  directories do not change; `read_totals`' `read_dir`), so that a read parses only the
  new ones. Without that, the reader parsed the base and up to ten deltas of some 60,000
  lines each several times a batch, CPU taken from the app's two cores.
- postgres (the app's, and the peer's `--app-postgres` table of the same layout): a
  SELECT of the probe words' totals in the run's table, through its primary key (a range
  scan), in autocommit.
- the peer's (Spark's own word count, bench/peers/spark_peer.py `--app-output`): the
  `delta-<batch id>` directories its foreachBatch writes with Spark's text writer, complete
  once their `_SUCCESS` is there.

A Watcher thread polls one reader every `every` seconds and notes in the ProbeBook the
time the poll started for each probe word found first.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.latency.probes import PROBE_END, PROBE_PREFIX, ProbeBook, probe_words
from streaming_app.sinks.files_layout import read_totals, read_totals_dir

Reader = Callable[[], set[str] | None]  # the probe words visible now (None: nothing new)


def files_reader(output_dir: Path) -> Reader:
    """The probe words among the totals `streaming-app totals` would print now."""
    last: list[list[str]] = [[]]
    parsed: dict[tuple[str, int], dict[str, Any]] = {}

    def read() -> set[str] | None:
        try:
            listing = sorted(os.listdir(output_dir))
        except FileNotFoundError:
            return None
        if listing == last[0]:
            return None
        last[0] = listing
        used: set[tuple[str, int]] = set()

        def read_dir(path: str) -> dict[str, Any]:
            key = (path, os.stat(path).st_mtime_ns)
            used.add(key)
            if key not in parsed:
                parsed[key] = read_totals_dir(path)
            return parsed[key]

        found = probe_words(read_totals(str(output_dir), read_dir=read_dir)[1])
        for key in set(parsed) - used:
            del parsed[key]
        return found

    return read


def postgres_reader(dsn: str, table: str) -> Reader:
    """The probe words in the postgres sink's table now (one connection, autocommit)."""
    import psycopg
    from psycopg import sql

    conn = psycopg.connect(dsn, autocommit=True)
    query = sql.SQL("SELECT word FROM {} WHERE word >= %s AND word < %s").format(
        sql.Identifier(table)
    )

    def read() -> set[str] | None:
        try:
            rows = conn.execute(query, [PROBE_PREFIX, PROBE_END]).fetchall()
        except psycopg.errors.UndefinedTable:
            return None  # the app has not created it yet
        return probe_words(row[0] for row in rows)

    read.close = conn.close  # type: ignore[attr-defined]
    return read


def peer_reader(output_dir: Path) -> Reader:
    """The probe words in the peer's complete delta directories not read before."""
    done: set[str] = set()

    def read() -> set[str] | None:
        try:
            names = os.listdir(output_dir)
        except FileNotFoundError:
            return None
        found: set[str] = set()
        for name in names:
            path = output_dir / name
            if name in done or not name.startswith("delta-") or not (path / "_SUCCESS").exists():
                continue
            done.add(name)
            for part in path.glob("part-*"):
                with open(part, encoding="utf-8") as handle:
                    found |= probe_words(line.split("\t", 1)[0] for line in handle)
        return found or None

    return read


class Watcher:
    """A thread polling a reader every `every` seconds until stopped."""

    def __init__(self, read: Reader, book: ProbeBook, every: float) -> None:
        self.read = read
        self.book = book
        self.every = every
        self.polls = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                at_ms = int(time.time() * 1000)
                words = self.read()
                self.polls += 1
                if words:
                    self.book.saw(words, at_ms)
                self._stop.wait(max(0.0, at_ms / 1000 + self.every - time.time()))
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        """Stop polling; raises what stopped the thread early, if anything did."""
        self._stop.set()
        self._thread.join(timeout=60)
        close = getattr(self.read, "close", None)
        if close:
            close()
        if self.error is not None:
            raise RuntimeError(f"the reader failed: {self.error!r}") from self.error
