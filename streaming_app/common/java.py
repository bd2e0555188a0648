"""Which java runs Spark: $JAVA_HOME/bin/java when it is there, else java on PATH."""

from __future__ import annotations

import os
import shutil


def java_binary() -> str | None:
    """The java binary, or None without Java."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")
