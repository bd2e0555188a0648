"""A micro-batch's changed totals: read once inside the pass, or copied for many readers."""

from __future__ import annotations

from typing import Any

import pytest

from streaming_app.structured.changes import Changes, needs_copy


class Frame:
    """A micro-batch's frame as Changes uses it: how often it was copied."""

    def __init__(self) -> None:
        self.copies: list[bool] = []

    def localCheckpoint(self, eager: bool) -> Any:  # noqa: N802 (PySpark's name)
        self.copies.append(eager)
        return ("copy", len(self.copies))


def test_a_micro_batch_copies_its_changes_only_for_a_second_reader() -> None:
    assert not needs_copy(("files", "console"), base=False, snapshot=False)
    assert needs_copy(("files", "console"), base=True, snapshot=False)
    assert needs_copy(("console",), base=False, snapshot=True)
    assert needs_copy(("console", "postgres"), base=False, snapshot=False)


def test_the_one_reader_gets_the_frame_itself() -> None:
    frame = Frame()
    changes = Changes(frame, copy=False)  # type: ignore[arg-type]
    assert id(changes.once()) == id(frame)
    assert frame.copies == [] and not changes.copied


def test_a_copy_is_made_once_and_read_by_every_reader() -> None:
    frame = Frame()
    changes = Changes(frame, copy=True)  # type: ignore[arg-type]
    assert frame.copies == [True]  # eager: the micro-batch ran into the blocks
    copy = changes.checkpointed()
    assert changes.once() is copy and changes.checkpointed() is copy
    assert frame.copies == [True]


def test_a_copy_asked_for_on_the_way_serves_the_pass_after_it() -> None:
    frame = Frame()
    changes = Changes(frame, copy=False)  # type: ignore[arg-type]
    copy = changes.checkpointed()  # a broken chain's base, before the pass
    assert changes.once() is copy and frame.copies == [True]


def test_a_copy_after_the_frame_was_read_is_refused() -> None:
    """The micro-batch would run a second time (its state operator too)."""
    changes = Changes(Frame(), copy=False)  # type: ignore[arg-type]
    changes.once()
    with pytest.raises(RuntimeError, match="read once already"):
        changes.checkpointed()
