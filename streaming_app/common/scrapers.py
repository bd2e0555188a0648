"""Who scrapes the metrics endpoint, and how long a stop that was asked for waits for them.

Driver side, both engines. A graceful stop is served as `streaming_app_stopping 1`; the
alert rules (conf/prometheus/alerts.yml) stay quiet when a driver's last word was that.
Every server that scrapes the app must read it: at Prometheus' own default of a scrape a
minute, or with two servers of an HA pair, one scrape after the stop is not enough. So the
port stays open until every scraper seen in the last SEEN_SECONDS has scraped once since
the stop began, each for at most two of its own intervals and a second after its last
scrape (a scraper that misses that is gone), and all within `metrics_linger_seconds`.

A scraper is told apart by what its requests carry: the remote address, the User-Agent
(`Prometheus/2.42.0`) and the query string. Two servers on one host, of one version, look
alike unless each adds a parameter of its own (`params: {replica: [a]}` in its scrape
configuration; docs/metrics.md). Only scraping servers are waited for: their requests carry
the header X-Prometheus-Scrape-Timeout-Seconds (Prometheus, and the agents built on its
scrape code or compatible with it: Grafana Agent, vmagent); a person with curl or a
script is not. Times are the injected clock's (monotonic seconds).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# Scrapers seen within this long are waited for; older ones are forgotten.
SEEN_SECONDS = 600.0
# At most this many are remembered (any client may send any query string): the oldest
# are forgotten first.
MOST_SCRAPERS = 64
# The default of metrics_linger_seconds: a scrape every 2 minutes and its 10 s timeout,
# and room for a late one.
DEFAULT_LINGER_SECONDS = 150.0
# A scraper is expected back within two of its intervals and this, after its last scrape.
SLACK_SECONDS = 1.0
_LONGEST_FIELD = 200  # characters of a User-Agent or query string kept
GAPS_KEPT = 4  # the gaps between a scraper's scrapes its interval is taken from


@dataclass(frozen=True)
class Scraper:
    """One client that scrapes /metrics, as its requests identify it."""

    address: str
    user_agent: str
    query: str

    def __str__(self) -> str:
        query = f"?{self.query}" if self.query else ""
        return f"{self.address} {self.user_agent or '-'}{query}"


def is_server(environ: Mapping[str, Any]) -> bool:
    """Whether a WSGI request comes from a scraping server (its scrape timeout header)."""
    return "HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS" in environ


def scraper_of(environ: Mapping[str, Any]) -> Scraper:
    """The scraper that sent a WSGI request."""
    return Scraper(
        address=str(environ.get("REMOTE_ADDR", "")),
        user_agent=str(environ.get("HTTP_USER_AGENT", ""))[:_LONGEST_FIELD],
        query=str(environ.get("QUERY_STRING", ""))[:_LONGEST_FIELD],
    )


@dataclass
class _Seen:
    last: float  # when it last scraped
    gaps: tuple[float, ...] = ()  # seconds between its last GAPS_KEPT + 1 scrapes
    saw_stop: bool = False  # a scrape of it served streaming_app_stopping 1
    server: bool = True  # it says it is a scraping server (waited for at a stop)

    @property
    def every(self) -> float | None:
        """Its interval: the longest of its last gaps (two servers that look alike, one
        scraper, show a short gap and a long one), None before its second scrape."""
        return max(self.gaps, default=None)


class Scrapers:
    """The scrapers of one endpoint and the stop's linger: thread-safe (the HTTP server's
    threads record scrapes while the driver's thread waits)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[Scraper, _Seen] = {}
        self._stopping_at: float | None = None
        self._changed = threading.Condition()

    @property
    def stopping(self) -> bool:
        """Whether a stop that was asked for began (read before a scrape builds its body)."""
        return self._stopping_at is not None

    def scraped(self, scraper: Scraper, saw_stop: bool, server: bool = True) -> None:
        """`scraper` scraped /metrics now; `saw_stop`: the body served the stop; `server`:
        the request says it comes from a scraping server (is_server)."""
        now = self._clock()
        with self._changed:
            seen = self._seen.pop(scraper, None)
            if seen is None:
                seen = _Seen(last=now)
            else:
                seen.gaps, seen.last = (*seen.gaps, now - seen.last)[-GAPS_KEPT:], now
            seen.saw_stop = seen.saw_stop or saw_stop
            seen.server = server
            self._seen[scraper] = seen  # the newest last: the oldest are first to forget
            self._forget(now)
            self._changed.notify_all()

    def _forget(self, now: float) -> None:
        """Forget scrapers not seen for SEEN_SECONDS, and the oldest beyond MOST_SCRAPERS."""
        for scraper in [s for s, seen in self._seen.items() if now - seen.last > SEEN_SECONDS]:
            del self._seen[scraper]
        while len(self._seen) > MOST_SCRAPERS:
            del self._seen[next(iter(self._seen))]

    def begin_stop(self) -> None:
        """A stop that was asked for began: from now on the scrapers must read it."""
        with self._changed:
            if self._stopping_at is None:
                self._stopping_at = self._clock()

    def _expected(self, now: float, most: float) -> dict[Scraper, float]:
        """The scraping servers still to read the stop, each with when to give up on it
        (under the lock): seen within SEEN_SECONDS; scraped twice or more, until two of its
        intervals and SLACK_SECONDS after its last scrape; seen once (its interval not
        known yet), until `most` after the stop began."""
        if self._stopping_at is None:
            return {}
        bound = self._stopping_at + most
        expected = {}
        for scraper, seen in self._seen.items():
            if seen.saw_stop or not seen.server or now - seen.last > SEEN_SECONDS:
                continue
            if seen.every is not None:
                expected[scraper] = min(bound, seen.last + 2 * seen.every + SLACK_SECONDS)
            else:
                expected[scraper] = bound
        return {s: until for s, until in expected.items() if until > now}

    def waiting_for(self, most: float) -> list[Scraper]:
        """The scrapers a linger of at most `most` seconds still waits for."""
        with self._changed:
            return list(self._expected(self._clock(), most))

    def linger_seconds(self, most: float) -> float:
        """How long a linger of at most `most` seconds after the stop began waits from now,
        if no scraper comes: 0 without a stop asked for (a crash), or once every scraper
        expected has read it."""
        now = self._clock()
        with self._changed:
            expected = self._expected(now, most)
        return max(expected.values(), default=now) - now

    def linger(self, most: float) -> bool:
        """Wait until every scraper expected has read the stop, at most `most` seconds after
        it began; whether all did (True also when none was expected)."""
        with self._changed:
            now = self._clock()
            expected = self._expected(now, most)
            waited = set(expected)
            end = time.monotonic() + max(expected.values(), default=now) - now
            while expected:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 1.0))
                expected = self._expected(self._clock(), most)
            return all(self._seen[s].saw_stop for s in waited if s in self._seen)
