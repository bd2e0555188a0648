"""The stop's linger: every scraper seen lately reads `streaming_app_stopping 1`, bounded."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from streaming_app.common.prometheus import Endpoint
from streaming_app.common.scrapers import (
    DEFAULT_LINGER_SECONDS,
    MOST_SCRAPERS,
    SEEN_SECONDS,
    Scraper,
    Scrapers,
    scraper_of,
)
from tests.unit.common.test_prometheus import INFO

PROMETHEUS = "Prometheus/2.42.0"
A = Scraper("10.0.0.5", PROMETHEUS, "replica=a")
B = Scraper("10.0.0.5", PROMETHEUS, "replica=b")  # the same host and version: its own params


class FakeClock:
    """Monotonic seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def scrape(port: int, query: str = "", server: bool = True) -> str:
    """One scrape of /metrics with `query`, as a Prometheus server sends it (or not); the
    body."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    url = f"http://127.0.0.1:{port}/metrics" + (f"?{query}" if query else "")
    headers = {"User-Agent": PROMETHEUS, "X-Prometheus-Scrape-Timeout-Seconds": "10"}
    request = urllib.request.Request(url, headers=headers if server else {})
    with opener.open(request, timeout=10) as response:
        return str(response.read().decode())


@contextmanager
def scraped_twice(*queries: str, every: float = 30, script: str = "") -> Iterator[Served]:
    """A serving endpoint on a fake clock that each of `queries` scraped twice, `every`
    seconds apart, as a scraping server (a `script` query as a script), then a stop began;
    closed after."""
    clock = FakeClock()
    endpoint = Endpoint(INFO, clock=clock)
    port = endpoint.serve("127.0.0.1", 0)
    try:
        for _ in range(2):
            for query in queries:
                scrape(port, query, server=not script or query != script)
            clock.now += every
        endpoint.begin_stop()
        yield Served(endpoint, port, clock)
    finally:
        endpoint.close()


@dataclass
class Served:
    endpoint: Endpoint
    port: int
    clock: FakeClock

    def waiting_for(self) -> list[str]:
        """The query strings of the scrapers a stop still waits for."""
        return [s.query for s in self.endpoint.scrapers.waiting_for(DEFAULT_LINGER_SECONDS)]


def test_a_scraper_is_its_address_user_agent_and_query_string() -> None:
    environ = {"REMOTE_ADDR": "10.0.0.5", "HTTP_USER_AGENT": PROMETHEUS, "QUERY_STRING": "x=1"}
    assert scraper_of(environ) == Scraper("10.0.0.5", PROMETHEUS, "x=1")
    assert scraper_of({"QUERY_STRING": "q" * 1000}).query == "q" * 200  # kept short
    assert str(A) == "10.0.0.5 Prometheus/2.42.0?replica=a"


def test_a_stop_waits_for_every_scraper_seen_lately_each_two_of_its_intervals_at_most() -> None:
    clock = FakeClock()
    scrapers = Scrapers(clock)
    scrapers.scraped(A, saw_stop=False)
    scrapers.scraped(B, saw_stop=False)
    clock.now += 60
    scrapers.scraped(A, saw_stop=False)  # A every 60 s
    clock.now += 60
    scrapers.scraped(A, saw_stop=False)
    scrapers.scraped(B, saw_stop=False)  # B every 120 s: an HA pair's second server
    assert scrapers.linger_seconds(DEFAULT_LINGER_SECONDS) == 0  # no stop asked (a crash)
    clock.now += 10
    scrapers.begin_stop()
    # A is due back 50 s from now, B 110 s; each waited for until two intervals and a
    # second after its last scrape, all within 150 s of the stop.
    assert scrapers.waiting_for(DEFAULT_LINGER_SECONDS) == [A, B]
    assert scrapers.linger_seconds(DEFAULT_LINGER_SECONDS) == 150.0  # B: min(241 - 10, 150)
    assert scrapers.linger_seconds(60.0) == 60.0  # metrics_linger_seconds bounds it
    assert scrapers.linger_seconds(0.0) == 0.0  # 0: no linger at all
    clock.now += 50
    scrapers.scraped(A, saw_stop=True)  # one server read it: not enough
    assert scrapers.waiting_for(DEFAULT_LINGER_SECONDS) == [B]
    assert scrapers.linger_seconds(DEFAULT_LINGER_SECONDS) == 100.0
    clock.now += 60
    scrapers.scraped(B, saw_stop=True)
    assert scrapers.waiting_for(DEFAULT_LINGER_SECONDS) == []
    assert scrapers.linger_seconds(DEFAULT_LINGER_SECONDS) == 0
    assert scrapers.linger(DEFAULT_LINGER_SECONDS) is True


def test_a_scrape_that_served_stopping_0_is_not_a_reading_of_the_stop() -> None:
    clock = FakeClock()
    scrapers = Scrapers(clock)
    scrapers.scraped(A, saw_stop=False)
    clock.now += 5
    scrapers.scraped(A, saw_stop=False)
    scrapers.begin_stop()
    scrapers.scraped(A, saw_stop=False)  # its body was built before the stop began
    assert scrapers.waiting_for(10.0) == [A]


def test_no_linger_for_a_client_nor_for_a_server_gone_but_for_a_server_seen_once() -> None:
    clock = FakeClock()
    scrapers = Scrapers(clock)
    curl = Scraper("127.0.0.1", "curl/8.0", "")
    for _ in range(2):  # a person looked twice: no scraping server, not waited for
        scrapers.scraped(curl, saw_stop=False, server=False)
    gone = Scraper("10.0.0.9", PROMETHEUS, "")
    scrapers.scraped(gone, saw_stop=False)
    clock.now += 15
    scrapers.scraped(gone, saw_stop=False)  # every 15 s, then no more
    clock.now += 31.5
    scrapers.begin_stop()
    assert scrapers.linger_seconds(DEFAULT_LINGER_SECONDS) == 0  # it missed two scrapes
    assert scrapers.linger(DEFAULT_LINGER_SECONDS) is True
    # A server seen once (the app started less than an interval ago) is waited for, to
    # the bound: its interval is not known yet.
    fresh = Scraper("10.0.0.7", PROMETHEUS, "")
    scrapers.scraped(fresh, saw_stop=False)
    assert scrapers.waiting_for(DEFAULT_LINGER_SECONDS) == [fresh]
    assert scrapers.linger_seconds(DEFAULT_LINGER_SECONDS) == 150.0
    # A scraper not seen for SEEN_SECONDS is forgotten, whatever its interval.
    clock.now += SEEN_SECONDS + 1
    assert scrapers.linger_seconds(DEFAULT_LINGER_SECONDS * 10) == 0


def test_scrapers_remembered_are_bounded() -> None:
    clock = FakeClock()
    scrapers = Scrapers(clock)
    for n in range(MOST_SCRAPERS + 40):
        scrapers.scraped(Scraper("10.0.0.5", PROMETHEUS, f"n={n}"), saw_stop=False)
        clock.now += 0.01
    scrapers.begin_stop()
    waited = scrapers.waiting_for(DEFAULT_LINGER_SECONDS)
    assert len(waited) == MOST_SCRAPERS and waited[0].query == "n=40"  # the oldest forgotten


def test_two_servers_on_one_host_are_told_apart_by_their_params_and_each_must_read_it() -> None:
    with scraped_twice("replica=a", "replica=b") as served:
        assert served.waiting_for() == ["replica=a", "replica=b"]
        assert "streaming_app_stopping 1.0" in scrape(served.port, "replica=a")
        assert served.waiting_for() == ["replica=b"]
        # The wait ends when the second server's scrape has read the stop, and not before.
        served.clock.now += 30.5  # b is given up 61 s after its last scrape: 0.5 s left
        assert served.endpoint.linger(DEFAULT_LINGER_SECONDS) is False
        served.clock.now -= 30.5
        bodies: list[str] = []
        later = threading.Thread(target=lambda: bodies.append(scrape(served.port, "replica=b")))
        later.start()  # the second server's next scrape, during (or before) the wait
        assert served.endpoint.linger(DEFAULT_LINGER_SECONDS) is True
        later.join(timeout=30)
        assert "streaming_app_stopping 1.0" in bodies[0]


def test_only_scraping_servers_are_waited_for_by_the_endpoint() -> None:
    with scraped_twice("by=a-script", "by=prometheus", every=15, script="by=a-script") as served:
        assert served.waiting_for() == ["by=prometheus"]


def test_without_params_two_servers_on_one_host_are_one_scraper() -> None:
    with scraped_twice("", "") as served:
        # One scraper, whose interval is the longest gap between the scrapes: 30 s.
        assert served.waiting_for() == [""]
        scrape(served.port)  # either server's scrape ends the wait: the other may miss it
        assert served.endpoint.linger(DEFAULT_LINGER_SECONDS) is True
