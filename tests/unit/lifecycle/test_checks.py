"""Start-up lines of lifecycle/checks.py that need no Spark."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from streaming_app.lifecycle.checks import say_default_checkpoint
from streaming_app.settings.loading import load_config


def test_a_run_without_checkpoint_dir_says_where_its_checkpoint_goes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO):
        say_default_checkpoint(load_config(None, {}, {}))
        say_default_checkpoint(load_config(None, {}, {"checkpoint_dir": "/data/ckpt"}))
    assert [r.getMessage() for r in caplog.records] == [
        f"the checkpoint is {os.path.join(tmp_path, 'checkpoint')} (checkpoint_dir's default: "
        "./checkpoint where the run started; --checkpoint-dir sets it)"
    ]
