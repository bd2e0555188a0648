"""The state's figures for the metrics, and what a sink's write tells the endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from streaming_app.common.batch_time import epoch_ms
from streaming_app.jobs.text import add_counts
from streaming_app.state import observe
from streaming_app.state.figures import StateFigures

T0 = datetime(2026, 11, 28, 12, 0, 0)


@dataclass
class Digest:
    keys: int
    added: int | None


class View:
    """A state view as the figures read it: bucketed or not, its digest counted."""

    def __init__(self, bucketed: bool = True, add: Any = add_counts) -> None:
        self.bucketed, self.add, self.digests = bucketed, add, 0

    def digest(self, rdd: Any) -> Digest:
        self.digests += 1
        return Digest(keys=7, added=12)


class Rdd:
    def __init__(self, checkpointed: bool) -> None:
        self.checkpointed = checkpointed

    def isCheckpointed(self) -> bool:  # noqa: N802 (PySpark's name)
        return self.checkpointed


def test_figures_are_noted_once_a_batch_only_while_wanted() -> None:
    figures, view = StateFigures(), View()
    figures.note(1000, Rdd(False), view)  # type: ignore[arg-type]
    assert figures.take(1000) == (None, None) and view.digests == 0
    figures.wanted = True
    figures.note(1000, Rdd(False), view)  # type: ignore[arg-type]
    figures.note(1000, Rdd(False), view)  # type: ignore[arg-type]  # the batch's second sink
    assert view.digests == 1
    assert figures.take(1000) == (7, 12)
    assert figures.take(1000) == (None, None)  # forgotten once taken


def test_keyed_sums_report_keys_and_no_words() -> None:
    figures = StateFigures()
    figures.wanted = True
    figures.note(1000, Rdd(False), View(add=lambda a, b: a + b))  # type: ignore[arg-type]
    assert figures.take(1000) == (7, None)


def test_one_record_per_key_reports_nothing() -> None:
    figures, view = StateFigures(), View(bucketed=False)
    figures.wanted = True
    figures.note(1000, Rdd(False), view)  # type: ignore[arg-type]
    assert figures.take(1000) == (None, None) and view.digests == 0


@pytest.mark.parametrize("checkpointed", [True, False])
def test_a_checkpointed_state_stamps_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    stamped: list[tuple[str, Any]] = []
    monkeypatch.setattr(observe, "succeeded", lambda op, s: stamped.append((op, s)))
    figures = StateFigures()
    monkeypatch.setattr(observe, "FIGURES", figures)
    observe.observe_state(T0, Rdd(checkpointed), View())  # type: ignore[arg-type]
    assert stamped == []  # nothing asks
    figures.wanted = True
    observe.observe_state(T0, Rdd(checkpointed), View())  # type: ignore[arg-type]
    observe.observe_state(T0, Rdd(checkpointed), View())  # type: ignore[arg-type]
    assert stamped == ([("checkpoint", None)] if checkpointed else [])
    assert figures.take(epoch_ms(T0)) == (7, 12)
