"""A program from the system's packages that a test needs: its path, or a skip (a failure in CI)."""

from __future__ import annotations

import os
import shutil

import pytest


def require(program: str, install: str) -> str:
    """`program`'s path; skipped where it is missing, failed under CI (.ci/run installs it)."""
    found = shutil.which(program)
    if found is None:
        reason = f"{program} is not installed ({install})"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found
