"""The integration tests' one wait (tests/integration/harness.py `wait_for`), without a
clock to wait on: it returns what its condition found, and fails at once, naming what it
waited for, when its time is up or the process it watches has ended."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.harness import wait_for


class Ended:
    """A process that has exited with `code`."""

    def __init__(self, code: int | None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def test_it_returns_what_the_condition_found() -> None:
    answers: list[Any] = [None, [], {"a": 1}]
    assert wait_for("a dict", lambda: answers.pop(0), 60, pause=0) == {"a": 1}
    assert answers == []


def test_it_fails_naming_what_it_waited_for_and_what_was_last_seen() -> None:
    with pytest.raises(AssertionError) as failed:
        wait_for("the totals", lambda: False, 0, detail=lambda: "seen: w01=3")
    assert str(failed.value) == "timed out after 0 s waiting for the totals\nseen: w01=3"


def test_it_fails_at_once_when_the_process_it_watches_ended() -> None:
    polled: list[bool] = []

    def never() -> bool:
        polled.append(False)
        return False

    with pytest.raises(AssertionError, match=r"^ended \(exit code 3\) while waiting for x$"):
        wait_for("x", never, 5, proc=Ended(3))
    assert len(polled) == 1  # not polled again until the timeout
    assert wait_for("y", lambda: True, 5, proc=Ended(None))  # a running one: no failure
